package bench

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// echoServer answers every byte with itself until the client closes.
func echoServer(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return l.Addr().String()
}

func delayProxy(t *testing.T, target string, oneWay time.Duration) *DelayProxy {
	t.Helper()
	p, err := StartDelayProxy(target, oneWay)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// A round trip through the proxy takes at least the RTT (twice the
// one-way delay), every time, and the bytes come back as sent.
func TestDelayProxyRoundTripTakesTheRTT(t *testing.T) {
	t.Parallel()
	const oneWay = 15 * time.Millisecond
	p := delayProxy(t, echoServer(t), oneWay)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 5)
	for i := range 4 {
		t0 := time.Now()
		if _, err := c.Write([]byte("ping" + string(rune('0'+i)))); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(t0); d < 2*oneWay {
			t.Errorf("round trip %d took %s; want at least the RTT, %s", i, d, 2*oneWay)
		}
		if want := "ping" + string(rune('0'+i)); string(buf) != want {
			t.Errorf("round trip %d: got %q back, want %q", i, buf, want)
		}
	}
	up, down, conns := p.Forwarded()
	if up != 20 || down != 20 || conns != 1 {
		t.Errorf("forwarded %d bytes up, %d down, %d connections; want 20, 20, 1", up, down, conns)
	}
}

// A stream of many small writes (4 MiB in 4 KiB writes) arrives whole, in
// order, about one delay after it was written: a delay line, not a sleep
// per read, which would hold the stream back by the delay once per read
// (with reads of at most 64 KiB, at least 64 times: 64 × 50 ms = 3.2 s).
func TestDelayProxyDoesNotSerializeWrites(t *testing.T) {
	t.Parallel()
	const (
		oneWay = 50 * time.Millisecond
		writes = 1024
		size   = 4 << 10
	)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got := make(chan []byte, 1)
	arrived := make(chan time.Time, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			arrived <- time.Now()
			got <- nil
			return
		}
		defer c.Close()
		b, _ := io.ReadAll(c) // to the proxy's half-close
		arrived <- time.Now()
		got <- b
	}()
	p := delayProxy(t, l.Addr().String(), oneWay)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var want bytes.Buffer
	t0 := time.Now()
	for i := range writes {
		chunk := bytes.Repeat([]byte{byte('a' + i%26)}, size)
		want.Write(chunk)
		if _, err := c.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	sent := time.Since(t0)
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	at, b := <-arrived, <-got
	if !bytes.Equal(b, want.Bytes()) {
		t.Fatalf("the server got %d bytes, not the %d written, in order", len(b), want.Len())
	}
	took := at.Sub(t0)
	if took < oneWay {
		t.Errorf("the stream arrived after %s; want at least the delay, %s", took, oneWay)
	}
	// A sleep per read would take at least 64 delays (3.2 s); a delay
	// line the sending time and one delay. The margin is wide, for a
	// loaded machine.
	if limit := sent + 20*oneWay; took > limit {
		t.Errorf("%d writes of %d bytes arrived after %s (written in %s); want within %s: the proxy serializes its reads",
			writes, size, took, sent, limit)
	}
	if up, _, _ := p.Forwarded(); up != int64(want.Len()) {
		t.Errorf("forwarded %d bytes up, want %d", up, want.Len())
	}
}

func TestDelayProxyRefusesNoDelay(t *testing.T) {
	t.Parallel()
	if _, err := StartDelayProxy("127.0.0.1:1", 0); err == nil {
		t.Error("a delay of 0: no error")
	}
}

// A client that resets its connection ends the server's too: the proxy
// does not keep a half-dead relay open.
func TestDelayProxyPassesOnAReset(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ended := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			ended <- err
			return
		}
		defer c.Close()
		_, err = io.Copy(io.Discard, c) // the server only reads: it ends when the proxy closes
		ended <- err
	}()
	p := delayProxy(t, l.Addr().String(), time.Millisecond)
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.TCPConn).SetLinger(0) // Close sends RST, not FIN
	_ = c.Close()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the server's connection stayed open after the client's reset")
	}
}
