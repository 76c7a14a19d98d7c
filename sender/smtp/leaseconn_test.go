package smtp

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// go-mail sets its deadline to now plus its timeout before each message;
// through a leaseConn that deadline never passes the send's, and a write
// after the send's deadline is refused before it reaches the socket.
func TestLeaseConnCutsDeadlinesToTheSend(t *testing.T) {
	t.Parallel()
	client, server := net.Pipe()
	t.Cleanup(func() { client.Close(); server.Close() })
	lc := &leaseConn{Conn: client}

	if err := lc.limit(time.Now().Add(100 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if err := lc.SetDeadline(time.Now().Add(time.Hour)); err != nil { // what go-mail does
		t.Fatal(err)
	}
	// The server never answers: the read ends at the send's deadline, not
	// in an hour.
	if _, err := lc.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read past the send's deadline: %v, want a deadline error", err)
	}

	if err := lc.limit(time.Now().Add(-time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	_ = lc.Conn.SetDeadline(time.Time{}) // as if the runtime had not fired the deadline yet
	got := make(chan int, 1)
	go func() {
		_ = server.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		n, _ := server.Read(make([]byte, 16))
		got <- n
	}()
	if n, err := lc.Write([]byte(".\r\n")); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write after the send's deadline: %d, %v; want refused", n, err)
	}
	if n := <-got; n != 0 {
		t.Fatalf("the server read %d bytes written after the deadline", n)
	}

	// Between sends there is no cut: Close's QUIT gets its own deadline.
	if err := lc.limit(time.Time{}); err != nil {
		t.Fatal(err)
	}
	if far := time.Now().Add(time.Hour); !lc.clamp(far).Equal(far) {
		t.Fatal("a deadline was cut with no send in progress")
	}
}
