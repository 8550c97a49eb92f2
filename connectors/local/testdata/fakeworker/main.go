// Command fakeworker is the worker process of the local connector's tests: it serves
// GET /healthz on its HTTP port after --startup, holds its FPM port, prints what it was given
// (pid, CUDA_VISIBLE_DEVICES) to stdout, and on SIGTERM drains for --drain before exiting
// (or until the file --drain-until exists, so that a test decides when the drain ends; or
// ignores SIGTERM with --ignore-term). With --child it starts a grandchild in its own
// process group that ignores SIGTERM, to check that the supervisor kills what a worker left.
package main

import (
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	name := flag.String("name", "", "worker name")
	httpPort := flag.Int("http-port", 0, "HTTP port serving /healthz")
	fpmPort := flag.Int("fpm-port", 0, "FPM port to hold")
	startup := flag.Duration("startup", 0, "delay before /healthz answers")
	drain := flag.Duration("drain", 0, "delay between SIGTERM and exit")
	drainUntil := flag.String("drain-until", "", "after SIGTERM, drain until this file exists (instead of --drain)")
	ignoreTerm := flag.Bool("ignore-term", false, "ignore SIGTERM")
	withChild := flag.Bool("child", false, "start a grandchild that ignores SIGTERM")
	sleepOnly := flag.Bool("sleep-only", false, "only sleep (the grandchild)")
	flag.Parse()

	term := make(chan os.Signal, 4)
	signal.Notify(term, syscall.SIGTERM)
	if *sleepOnly {
		for range term {
		}
	}
	fmt.Printf("start name=%s pid=%d cuda=%s index=%s\n", *name, os.Getpid(), os.Getenv("CUDA_VISIBLE_DEVICES"), os.Getenv("WORKER_INDEX"))
	fmt.Printf("env api_key=%q path_set=%t\n", os.Getenv("TEMPORAL_API_KEY"), os.Getenv("PATH") != "")
	if *withChild {
		c := exec.Command(os.Args[0], "--sleep-only")
		if err := c.Start(); err != nil {
			fmt.Println("child error:", err)
			os.Exit(1)
		}
		fmt.Printf("child pid=%d\n", c.Process.Pid)
	}
	if *fpmPort != 0 {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *fpmPort))
		if err != nil {
			fmt.Println("fpm listen error:", err)
			os.Exit(1)
		}
		defer l.Close()
	}
	go func() {
		time.Sleep(*startup)
		mux := http.NewServeMux()
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
		if err := http.ListenAndServe(fmt.Sprintf("127.0.0.1:%d", *httpPort), mux); err != nil {
			fmt.Println("http error:", err)
			os.Exit(1)
		}
	}()
	for range term {
		fmt.Println("sigterm")
		if *ignoreTerm {
			continue
		}
		if *drainUntil != "" {
			for {
				if _, err := os.Stat(*drainUntil); err == nil {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
		} else {
			time.Sleep(*drain)
		}
		fmt.Println("exit")
		os.Exit(0)
	}
}
