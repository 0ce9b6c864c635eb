// Command sandboxprobe is what the isolation tests run as root inside
// sandboxes and build steps: each subcommand tries one thing an attacker
// would and prints what happened, one line per attempt.
//
//	sandboxprobe caps                       CapEff and NoNewPrivs of itself
//	sandboxprobe packet <marker> <seconds>  open raw/packet sockets; capture and look for marker
//	sandboxprobe dial <host:port>...        TCP connect to each
//	sandboxprobe ifaces                     the network interfaces it sees
//	sandboxprobe serve <addr> <text>        an HTTP server answering text, the path and Host (Upgrade: echo echoes)
//	sandboxprobe get <url>                  GET through $HTTP_PROXY, even for loopback names
//	sandboxprobe fetch <url>                GET as any Go program does (http.DefaultClient); exit 1 on failure
package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: sandboxprobe caps|packet|dial|ifaces|serve|get|fetch ...")
		os.Exit(2)
	}
	args := os.Args[2:]
	switch os.Args[1] {
	case "caps":
		raw, err := os.ReadFile("/proc/self/status")
		if err != nil {
			fmt.Println("caps:", err)
			return
		}
		for line := range strings.Lines(string(raw)) {
			if strings.HasPrefix(line, "CapEff:") || strings.HasPrefix(line, "NoNewPrivs:") {
				fmt.Print(line)
			}
		}
	case "packet":
		packet(args[0], args[1])
	case "dial":
		for _, addr := range args {
			c, err := net.DialTimeout("tcp", addr, 2*time.Second)
			if err != nil {
				fmt.Printf("dial %s: %v\n", addr, err)
				continue
			}
			c.Close()
			fmt.Printf("dial %s: connected\n", addr)
		}
	case "ifaces":
		ifs, err := net.Interfaces()
		if err != nil {
			fmt.Println("ifaces:", err)
			return
		}
		for _, i := range ifs {
			fmt.Println("iface", i.Name)
		}
	case "serve":
		text := args[1]
		err := http.ListenAndServe(args[0], http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Upgrade") == "echo" {
				// A minimal upgrade: after the 101, echo every byte.
				conn, _, err := http.NewResponseController(w).Hijack()
				if err != nil {
					return
				}
				defer conn.Close()
				_, _ = io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
				_, _ = io.Copy(conn, conn)
				return
			}
			fmt.Fprintf(w, "%s path=%s host=%s", text, r.URL.Path, r.Host)
		}))
		fmt.Println("serve:", err)
		os.Exit(1)
	case "get":
		get(args[0])
	case "fetch":
		fetch(args[0])
	default:
		fmt.Fprintln(os.Stderr, "unknown subcommand", os.Args[1])
		os.Exit(2)
	}
}

// packet opens the sockets a sniffer needs and, for those that open,
// reads for a while looking for marker.
func packet(marker, seconds string) {
	secs, _ := strconv.Atoi(seconds)
	type attempt struct {
		name                  string
		domain, typ, protocol int
	}
	ethPAll := int(htons(syscall.ETH_P_ALL))
	var open []int
	for _, a := range []attempt{
		{"AF_PACKET SOCK_RAW", syscall.AF_PACKET, syscall.SOCK_RAW, ethPAll},
		{"AF_PACKET SOCK_DGRAM", syscall.AF_PACKET, syscall.SOCK_DGRAM, ethPAll},
		{"AF_INET SOCK_RAW tcp", syscall.AF_INET, syscall.SOCK_RAW, syscall.IPPROTO_TCP},
	} {
		fd, err := syscall.Socket(a.domain, a.typ, a.protocol)
		if err != nil {
			fmt.Printf("socket %s: %v\n", a.name, err)
			continue
		}
		fmt.Printf("socket %s: opened\n", a.name)
		open = append(open, fd)
	}
	if len(open) == 0 {
		return
	}
	deadline := time.Now().Add(time.Duration(secs) * time.Second)
	buf := make([]byte, 65536)
	for time.Now().Before(deadline) {
		for _, fd := range open {
			tv := syscall.Timeval{Usec: 100_000}
			_ = syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv)
			n, _, err := syscall.Recvfrom(fd, buf, 0)
			if err == nil && bytes.Contains(buf[:n], []byte(marker)) {
				fmt.Println("CAPTURED the marker")
				return
			}
		}
	}
	fmt.Println("packet: marker not seen")
}

// fetch GETs rawURL with Go's default client: the proxy from the
// environment, the system's roots (SSL_CERT_FILE), what Go programs in a
// sandbox get.
func fetch(rawURL string) {
	resp, err := http.Get(rawURL) //nolint:gosec,noctx // the URL is the test's; a probe of what Go programs do
	if err != nil {
		fmt.Println("fetch:", err)
		os.Exit(1)
	}
	defer resp.Body.Close()
	fmt.Println("fetch:", resp.Status)
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// get fetches rawURL through the proxy named by HTTP_PROXY, also for
// hosts NO_PROXY exempts: the tests reach the host's loopback this way.
func get(rawURL string) {
	proxy := os.Getenv("HTTP_PROXY")
	if proxy == "" {
		fmt.Println("get: HTTP_PROXY is not set")
		return
	}
	pu, err := url.Parse(proxy)
	if err != nil {
		fmt.Println("get:", err)
		return
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: http.ProxyURL(pu)}}
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, rawURL, nil)
	resp, err := c.Do(req)
	if err != nil {
		fmt.Println("get:", err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	fmt.Printf("get: %d %s\n", resp.StatusCode, strings.TrimSpace(string(body)))
}
