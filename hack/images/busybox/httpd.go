package main

import (
	"context"
	"flag"
	"io"
	"net/http"
	"strconv"
)

// httpd serves a folder's files: busybox's -f (foreground, the only way it runs here),
// -p PORT and -h HOME.
func httpd(ctx context.Context, std stdio, dir string, args []string) error {
	fs := flag.NewFlagSet("httpd", flag.ContinueOnError)
	fs.SetOutput(std.err)
	fs.Bool("f", true, "stay in the foreground (always)")
	port := fs.Int("p", 80, "port")
	home := fs.String("h", ".", "folder to serve")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	srv := &http.Server{Addr: ":" + strconv.Itoa(*port), Handler: http.FileServer(http.Dir(at(dir, *home))),
		ErrorLog: nil}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	err := srv.ListenAndServe()
	if err == http.ErrServerClosed {
		return nil
	}
	io.WriteString(std.err, "httpd: "+err.Error()+"\n")
	return err
}
