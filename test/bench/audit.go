package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"time"
)

// auditPolicy logs the metadata of every request by the users being counted, and nothing
// else (the simulated holders' renewals would drown the log).
func auditPolicy(users ...string) string {
	p := "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n  users:\n"
	for _, u := range users {
		p += "  - " + u + "\n"
	}
	return p + "- level: None\n"
}

type auditEvent struct {
	Verb string `json:"verb"`
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	ImpersonatedUser *struct {
		Username string `json:"username"`
	} `json:"impersonatedUser"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
	} `json:"objectRef"`
	Received time.Time `json:"requestReceivedTimestamp"`
}

// requests counts one user's requests in a window, by verb and resource.
type requests map[string]int

func (r requests) total() int {
	n := 0
	for _, c := range r {
		n += c
	}
	return n
}

// sum adds the counts of the keys named.
func (r requests) sum(keys ...string) int {
	n := 0
	for _, k := range keys {
		n += r[k]
	}
	return n
}

func (r requests) writes() int {
	n := 0
	for k, c := range r {
		if verbOf(k) != "get" && verbOf(k) != "list" {
			n += c
		}
	}
	return n
}

func verbOf(key string) string {
	for i := range key {
		if key[i] == ' ' {
			return key[:i]
		}
	}
	return key
}

// auditCount reads the log at path and counts user's requests received in [from, to) in
// namespaces for which inNS is true, watches left out (one per informer, not per action).
// With as set, every one of them must have been sent impersonating as.
func auditCount(path, user, as string, from, to time.Time, inNS func(string) bool) (requests, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := requests{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	mark := []byte(`"username":"` + user + `"`)
	for sc.Scan() {
		if !bytes.Contains(sc.Bytes(), mark) {
			continue // most lines are another user's: skip them unparsed
		}
		var e auditEvent
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.User.Username != user || e.Verb == "watch" {
			continue
		}
		if e.Received.Before(from) || !e.Received.Before(to) || !inNS(e.ObjectRef.Namespace) {
			continue
		}
		if as != "" && (e.ImpersonatedUser == nil || e.ImpersonatedUser.Username != as) {
			return nil, fmt.Errorf("%s's %s %s was not sent as %s: the API server did not authorize and prioritize it as in a cluster", user, e.Verb, e.ObjectRef.Resource, as)
		}
		res := e.ObjectRef.Resource
		if e.ObjectRef.Subresource != "" {
			res += "/" + e.ObjectRef.Subresource
		}
		out[e.Verb+" "+res]++
	}
	return out, sc.Err()
}
