package ledgertest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weeklydigest/digest/digest"
	"github.com/weeklydigest/digest/ledger"
)

// helperEnv switches the HelperProcess subtest on in a re-executed test
// binary.
const helperEnv = "DIGEST_LEDGER_HELPER"

// helperProcess is not a test: run by testTwoProcesses in a child process
// (the same test binary, told to run only this subtest of Run), it opens
// the store named by its environment, migrates it, says "ready", waits for
// a line on stdin, claims one key and prints the outcome.
func helperProcess(t *testing.T, be Driver) {
	if os.Getenv(helperEnv) != "1" {
		return
	}
	ctx := context.Background()
	s := be.Open(t, Database{URL: os.Getenv("HELPER_DATABASE_URL"), Path: os.Getenv("HELPER_PATH")}, Clocks{})
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	res, err := s.Claim(ctx, []digest.ClaimRequest{{
		Keys: []digest.Key{digest.Key(os.Getenv("HELPER_KEY"))}, Fingerprint: "fp1",
		Week: week, RunID: "process", Lease: time.Hour,
	}})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("outcome", res[0].Outcome)
}

// testTwoProcesses starts two OS processes on one fresh database: both
// migrate it at once, then both claim the same absent key at once.
func testTwoProcesses(t *testing.T, be Driver) {
	cfg := be.Fresh(t)
	key := keys(t, "customer_1")[0]
	type child struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		out   *bufio.Reader
	}
	children := make([]child, 2)
	for i := range children {
		top, _, _ := strings.Cut(t.Name(), "/")
		cmd := exec.Command(os.Args[0], "-test.run=^"+top+"$/^HelperProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), helperEnv+"=1", "HELPER_DATABASE_URL="+cfg.URL,
			"HELPER_PATH="+cfg.Path, "HELPER_KEY="+string(key))
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		children[i] = child{cmd, stdin, bufio.NewReader(stdout)}
	}
	for i, c := range children {
		if line := readLine(t, c.out); line != "ready" {
			rest, _ := io.ReadAll(c.out)
			t.Fatalf("child %d: %q, want ready; then:\n%s", i, line, rest)
		}
	}
	for _, c := range children {
		io.WriteString(c.stdin, "go\n")
	}
	outcomes := make([]string, len(children))
	var wg sync.WaitGroup
	for i, c := range children {
		wg.Go(func() {
			for {
				line := readLine(t, c.out)
				if o, ok := strings.CutPrefix(line, "outcome "); ok || line == "" {
					outcomes[i] = o
					return
				}
			}
		})
	}
	wg.Wait()
	won := 0
	for i, o := range outcomes {
		switch o {
		case digest.OutcomeClaimed.String():
			won++
		case digest.OutcomeBusy.String():
		default:
			t.Errorf("child %d: outcome %q", i, o)
		}
	}
	if won != 1 {
		t.Fatalf("outcomes %v: want exactly one claimed", outcomes)
	}
}

// readLine returns the next line of a child's output, "" at its end.
func readLine(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	line, err := r.ReadString('\n')
	if err != nil && err != io.EOF {
		t.Errorf("read child output: %v", err)
	}
	return strings.TrimSpace(line)
}

func testMigrateTwiceAndConcurrently(t *testing.T, be Driver) {
	cfg := be.Fresh(t)
	clk := newClock()
	stores := []ledger.Store{open(t, be, cfg, clk), open(t, be, cfg, clk)}
	errs := make([]error, len(stores))
	var wg sync.WaitGroup
	for i, s := range stores {
		wg.Go(func() { errs[i] = s.Migrate(context.Background()) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("concurrent migrate %d: %v", i, err)
		}
	}
	if err := stores[0].Migrate(context.Background()); err != nil {
		t.Fatalf("migrate again: %v", err)
	}
	mustClaim(t, stores[1], req(keys(t, "customer_1"), "fp1"))
}
