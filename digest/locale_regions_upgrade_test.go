package digest_test

import (
	"testing"

	"github.com/weeklydigest/digest/digest"
)

// TestSampleWeekFingerprintsUnchangedByRegions pins the fingerprint of
// every digest of the sample week (examples/snapshot.jsonl, 2026-W48) as
// computed at 6a547be, before formats were keyed on the full locale, the
// wording was reviewed and the optional time_zone field was added (issue
// 21). Rendering is not part of the canonical form: a digest that does not
// use a new field must keep its fingerprint, or a rerun of a week sent
// before the upgrade would find fingerprint mismatches and quarantine it.
// If this test fails, the canonical form changed: read docs/operations.md,
// "Upgrading across a change of the canonical form", before updating it.
func TestSampleWeekFingerprintsUnchangedByRegions(t *testing.T) {
	t.Parallel()
	want := map[string]string{
		"cust_0001": "sha256:c5ce8ca9f6c981131b261e68f746070365a670a54d9a060b09281741474a0b76",
		"cust_0002": "sha256:cae8e774dbdf0039f92c4a8a3b73715ab2006d357dbc78020297c8d36fabe75b",
		"cust_0003": "sha256:ab6d88c3dbb04a7c2d232f5774160bbba64d3361cdf7714be4e8ed856fb829f8",
		"cust_0004": "sha256:956cf9d99788069b69603538af7506f6eda2f0a28ad0adace55ae517ca3f8acd",
		"cust_0005": "sha256:19855106a91a484aa361a631b053be478b5f4312ac8a2011dc5cf86d6bb73891",
		"cust_0006": "sha256:b5be985e4e52729b7006802cafc8ce7333ee8774e83897f0e5ffb1ca5933ed8e",
		"cust_0007": "sha256:61bab060c4b5ca79e30d086c1e1a1bba14e71fc298c8acce18f6305abef5f465",
		"cust_0008": "sha256:55c3fb0cd9a4cc8f0e17806c02c8ec0f056a508dd84c6a287edc74ec14c6acb8",
		"cust_0009": "sha256:e56dca1ef3d2e079c2f635fb65b1ab972db14f93e55028bd86fb474415534021",
		"cust_0010": "sha256:978aaf0da55ff46312e6df61d41ca3f01aac9f5ebb94a3ceae2f7ae6d07f6b6a",
		"cust_0011": "sha256:23a21c41efc0c03c0259d81d08522d5284786113c18fe79f8fe879d741412cdc",
		"cust_0012": "sha256:e92f8f302d92d666be7a8c4a873c259a7a321c43846fc34667d330b112972115",
		"cust_0013": "sha256:aa0ce9338ca2953227286c1efe2f7d828048fc9017f0be1493b977e8879f0d7a",
		"cust_0014": "sha256:e96e6f6725d71200623fbb609e722f6761d4783f21fa2eba07d7960178685ac8",
		"cust_0015": "sha256:4c01254e386e65f22b90afe5f45ba95d690e13977b61573187a4df57c7ce088b",
		"cust_0016": "sha256:31ba701d54b07338d5743b55f6b65475a91013883677e4e4a4ceabcacc4f408a",
		"cust_0017": "sha256:b4dd6bbfea0a6165018014cf33d2f056e4f96946852b5af48aebfdb09a2aac57",
		"cust_0018": "sha256:ccd0e08d7ad3877bb149ee826195245747de643f738dfa5fdaffc8889ae28222",
		"cust_0019": "sha256:54f63fcb5b98f011cccbd0950ba637c9f83a84d852804c99f18966568cb12ca4",
		"cust_0020": "sha256:8b298104076cd7884c3a1785e3f333cfc0538a3171ecbd128f7c961d9adeefb8",
		"cust_0021": "sha256:39a9fded2630c0bc3ed2bc87ca070e0b19016d82d30738f99c59d9df3f155eb0",
	}
	recs, spec := exampleRecords(t)
	if len(recs) != len(want) {
		t.Fatalf("%d customers, want the %d of the example", len(recs), len(want))
	}
	for _, rec := range recs {
		d, err := digest.Build(rec, spec)
		if err != nil {
			t.Fatal(err)
		}
		if fp := d.Fingerprint(); fp != want[rec.Customer.ID] {
			t.Errorf("%s: Fingerprint = %s, want %s (as before issue 21)", rec.Customer.ID, fp, want[rec.Customer.ID])
		}
	}
}
