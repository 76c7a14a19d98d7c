package deploy

import (
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// clusterEgress are the ports a pod may reach in each namespace: the
// ledger's database, the Pushgateway and an OTLP/HTTP collector, DNS.
var clusterEgress = map[string][]string{
	"db":          {"TCP/5432"},
	"monitoring":  {"TCP/9091", "TCP/4318"},
	"kube-system": {"UDP/53", "TCP/53"},
}

// mailPorts are the only ports a pod may reach outside the cluster: the
// provider's API (HTTPS), SMTP submission and SMTPS.
var mailPorts = []string{"TCP/443", "TCP/465", "TCP/587"}

// baseMailCIDR is the base's mail peer before an overlay gives its own:
// TEST-NET-1 (RFC 5737), which no host answers.
const baseMailCIDR = "192.0.2.0/24"

// mailPolicy is the NetworkPolicy whose one rule's peers are the
// overlays' parameter.
const mailPolicy = "digest-mail"

// mailCIDRs reads an overlay's parameter: the JSON patch of the mail
// policy's peers, decoded strictly.
func mailCIDRs(t *testing.T, overlay string) []string {
	t.Helper()
	dir := filepath.Join(overlayDir, overlay)
	var k kustomization
	decodeFile(t, filepath.Join(dir, "kustomization.yaml"), &k)
	i := slices.IndexFunc(k.Patches, func(p patch) bool {
		return p.Target != nil && p.Target.Kind == "NetworkPolicy" && p.Target.Name == mailPolicy
	})
	if i < 0 {
		t.Fatalf("%s: no patch of NetworkPolicy %s: the mail CIDRs are each overlay's", overlay, mailPolicy)
	}
	var ops []struct {
		Op    string                           `json:"op"`
		Path  string                           `json:"path"`
		Value []networkingv1.NetworkPolicyPeer `json:"value"`
	}
	decodeFile(t, filepath.Join(dir, k.Patches[i].Path), &ops)
	if len(ops) != 1 || ops[0].Op != "replace" || ops[0].Path != "/spec/egress/0/to" || len(ops[0].Value) == 0 {
		t.Fatalf("%s: %s: %+v; want one replace of /spec/egress/0/to with the CIDRs", overlay, k.Patches[i].Path, ops)
	}
	var cidrs []string
	for _, p := range ops[0].Value {
		if p.IPBlock == nil {
			t.Fatalf("%s: peer %+v; want ipBlocks alone", overlay, p)
		}
		cidrs = append(cidrs, p.IPBlock.CIDR)
	}
	return cidrs
}

// egressOf returns the egress rules of every policy that selects a pod
// with these labels, and whether one restricts its egress at all.
func (m *manifests) egressOf(t *testing.T, podLabels map[string]string) ([]networkingv1.NetworkPolicyEgressRule, bool) {
	t.Helper()
	var rules []networkingv1.NetworkPolicyEgressRule
	restricted := false
	for n, p := range m.policies {
		sel, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		if !sel.Matches(labels.Set(podLabels)) || !slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
			continue
		}
		restricted = true
		rules = append(rules, p.Spec.Egress...)
	}
	return rules, restricted
}

func portsOf(r networkingv1.NetworkPolicyEgressRule) []string {
	var out []string
	for _, p := range r.Ports {
		proto := "TCP"
		if p.Protocol != nil {
			proto = string(*p.Protocol)
		}
		port := "any"
		if p.Port != nil {
			port = p.Port.String()
		}
		out = append(out, proto+"/"+port)
	}
	return out
}

// TestEgress: every pod's egress is restricted to the ports the job uses:
// in the cluster, the database, the Pushgateway (or an OTLP collector)
// and DNS, each in its namespace; outside it, the mail ports alone (443, 465, 587), to the
// CIDRs the overlay gives (the base's own reach no host), and only from
// the pods that send. No rule is open to every peer or port, no CIDR is
// the whole Internet or "everything but" a list.
func TestEgress(t *testing.T) {
	t.Parallel()
	builds := map[string]func(t *testing.T) (*manifests, []string){
		"base":     func(t *testing.T) (*manifests, []string) { return loadManifests(t), []string{baseMailCIDR} },
		"schedule": func(t *testing.T) (*manifests, []string) { return scheduleBuild(t), []string{baseMailCIDR} },
	}
	for _, o := range overlays {
		builds[o] = func(t *testing.T) (*manifests, []string) {
			return kustomizeBuild(t, filepath.Join(overlayDir, o)), mailCIDRs(t, o)
		}
	}
	for name, build := range builds {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m, want := build(t)
			if name != "base" && name != "schedule" && slices.Contains(want, baseMailCIDR) {
				t.Errorf("the overlay keeps the base's placeholder %s: give the relay's and provider's CIDRs", baseMailCIDR)
			}
			cm := m.configMap(t)
			port := map[string]string{}
			for _, v := range []string{"DIGEST_DATABASE_URL", "DIGEST_SMTP_URL", "DIGEST_PUSHGATEWAY_URL"} {
				u, err := url.Parse(cm.Data[v])
				if err != nil || u.Port() == "" {
					t.Fatalf("ConfigMap %s %q: want a port (%v)", v, cm.Data[v], err)
				}
				port[v] = "TCP/" + u.Port()
			}
			// Reached inside the cluster, or outside it (an ipBlock).
			type dest struct {
				outside bool
				port    string
			}
			inside := func(p string) dest { return dest{false, p} }
			outside := func(p string) dest { return dest{true, p} }
			for n, p := range m.podTemplates() {
				rules, restricted := m.egressOf(t, p.Labels)
				if !restricted {
					t.Errorf("%s: no NetworkPolicy restricts its egress", n)
					continue
				}
				var cidrs []string
				reach := map[dest]bool{}
				for _, r := range rules {
					if len(r.To) == 0 || len(r.Ports) == 0 {
						t.Errorf("%s: an egress rule open to every peer or port: %+v", n, r)
					}
					ports := portsOf(r)
					for _, peer := range r.To {
						var allowed []string
						switch {
						case peer.IPBlock != nil && peer.NamespaceSelector == nil && peer.PodSelector == nil:
							b := peer.IPBlock
							_, ipnet, err := net.ParseCIDR(b.CIDR)
							if ones, _ := ipnet.Mask.Size(); err != nil || ones == 0 || len(b.Except) > 0 {
								t.Errorf("%s: ipBlock %+v (%v); want a provider's range, not everything (but)", n, b, err)
							}
							cidrs = append(cidrs, b.CIDR)
							allowed = mailPorts
						case peer.NamespaceSelector != nil && peer.IPBlock == nil && peer.PodSelector == nil:
							ns := peer.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"]
							if allowed = clusterEgress[ns]; allowed == nil || len(peer.NamespaceSelector.MatchLabels) != 1 {
								t.Errorf("%s: egress to namespaces %v; want one of %v by name", n, peer.NamespaceSelector, clusterEgress)
							}
						default:
							t.Errorf("%s: egress peer %+v; want a namespace or an ipBlock", n, peer)
						}
						for _, port := range ports {
							if !slices.Contains(allowed, port) {
								t.Errorf("%s: egress to %+v on %s; that peer is allowed %v alone", n, peer, port, allowed)
							}
							reach[dest{peer.IPBlock != nil, port}] = true
						}
					}
				}
				c := p.Spec.Containers[0]
				needs := []dest{inside("UDP/53"), inside(port["DIGEST_DATABASE_URL"])}
				switch c.Args[0] {
				case "run", "schedule":
					needs = append(needs, inside(port["DIGEST_PUSHGATEWAY_URL"]), inside("TCP/4318"), outside(port["DIGEST_SMTP_URL"]), outside("TCP/443"))
					if slices.Sort(cidrs); !slices.Equal(slices.Compact(cidrs), slices.Sorted(slices.Values(want))) {
						t.Errorf("%s: reaches %v outside the cluster; want the CIDRs %v", n, cidrs, want)
					}
				case "serve", "migrate", "prune":
					if c.Args[0] == "prune" {
						needs = append(needs, inside(port["DIGEST_PUSHGATEWAY_URL"]))
					}
					if len(cidrs) > 0 {
						t.Errorf("%s: digest %s reaches %v outside the cluster; it sends no mail", n, c.Args[0], cidrs)
					}
				default:
					t.Errorf("%s: digest %s: what it may reach is not known here", n, c.Args[0])
				}
				for _, need := range needs {
					if !reach[need] {
						t.Errorf("%s: digest %s cannot reach %s (outside the cluster: %v); reaches %v", n, c.Args[0], need.port, need.outside, reach)
					}
				}
			}
		})
	}
}

// TestJobsTakeNoConnection: every pod of a CronJob or Job (the templates
// created on their own too) is under the jobs' policy, which lets nothing
// in; the serve pods have their own.
func TestJobsTakeNoConnection(t *testing.T) {
	t.Parallel()
	forEachBuild(t, func(t *testing.T, m *manifests) {
		policy := m.policyNamed("digest-jobs")
		if policy == nil {
			t.Fatal("no NetworkPolicy digest-jobs")
		}
		sel, err := metav1.LabelSelectorAsSelector(&policy.Spec.PodSelector)
		if err != nil {
			t.Fatal(err)
		}
		for n, p := range m.podTemplates() {
			serve := p.Spec.Containers[0].Args[0] == "serve"
			if got := sel.Matches(labels.Set(p.Labels)); got == serve {
				t.Errorf("%s: selected by the jobs' policy: %v; want %v", n, got, !serve)
			}
		}
		if !slices.Contains(policy.Spec.PolicyTypes, "Ingress") || len(policy.Spec.Ingress) != 0 {
			t.Errorf("policyTypes %v, %d ingress rules; want Ingress with no rule (nothing connects to a Job's pod)", policy.Spec.PolicyTypes, len(policy.Spec.Ingress))
		}
	})
}
