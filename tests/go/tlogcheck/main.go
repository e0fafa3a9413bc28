// tlogcheck: Go's own golang.org/x/mod/sumdb/tlog and sumdb/note (Debian's
// golang-golang-x-mod-dev), asked what sabot's host code computes, for tests/test_tlog.py.
//
//	tlogcheck tree < {"n": N, "sizes": [...], "records": [[i, t], ...], "trees": [[m, t], ...]}
//	    leaf i is the record "leaf-<i>"; prints the tree hashes, record and tree proofs (hex),
//	    and with "tiles": [[L, N, W], ...] each tile's path (height 8) and data (hex)
//	tlogcheck open VKEY < NOTE      prints the verified note's text, or exits 1
//	tlogcheck sign NAME TEXT        prints a new key's vkey line, then TEXT signed by it
package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

type query struct {
	N       int64      `json:"n"`
	Sizes   []int64    `json:"sizes"`
	Records [][2]int64 `json:"records"`
	Trees   [][2]int64 `json:"trees"`
	Tiles   [][3]int64 `json:"tiles"` // level, index, width (height 8, as C2SP tlog-tiles)
}

func hexes(hs []tlog.Hash) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = hex.EncodeToString(h[:])
	}
	return out
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

func tree() {
	var q query
	if err := json.NewDecoder(os.Stdin).Decode(&q); err != nil {
		fail(err)
	}
	var stored []tlog.Hash
	reader := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			out[i] = stored[x]
		}
		return out, nil
	})
	for i := int64(0); i < q.N; i++ {
		hs, err := tlog.StoredHashes(i, []byte(fmt.Sprintf("leaf-%d", i)), reader)
		if err != nil {
			fail(err)
		}
		stored = append(stored, hs...)
	}
	res := map[string][]interface{}{}
	for _, n := range q.Sizes {
		h, err := tlog.TreeHash(n, reader)
		if err != nil {
			fail(err)
		}
		res["sizes"] = append(res["sizes"], hex.EncodeToString(h[:]))
	}
	for _, r := range q.Records {
		p, err := tlog.ProveRecord(r[1], r[0], reader)
		if err != nil {
			fail(err)
		}
		res["records"] = append(res["records"], hexes(p))
	}
	for _, t := range q.Trees {
		p, err := tlog.ProveTree(t[1], t[0], reader)
		if err != nil {
			fail(err)
		}
		res["trees"] = append(res["trees"], hexes(p))
	}
	for _, t := range q.Tiles {
		tile := tlog.Tile{H: 8, L: int(t[0]), N: t[1], W: int(t[2])}
		data, err := tlog.ReadTileData(tile, reader)
		if err != nil {
			fail(err)
		}
		res["tiles"] = append(res["tiles"], []string{tile.Path(), hex.EncodeToString(data)})
	}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		fail(err)
	}
}

func main() {
	if len(os.Args) < 2 {
		fail(fmt.Errorf("usage: tlogcheck tree|open VKEY|sign NAME TEXT"))
	}
	switch os.Args[1] {
	case "tree":
		tree()
	case "open":
		v, err := note.NewVerifier(os.Args[2])
		if err != nil {
			fail(err)
		}
		msg, err := io.ReadAll(os.Stdin)
		if err != nil {
			fail(err)
		}
		n, err := note.Open(msg, note.VerifierList(v))
		if err != nil {
			fail(err)
		}
		fmt.Print(n.Text)
	case "sign":
		skey, vkey, err := note.GenerateKey(rand.Reader, os.Args[2])
		if err != nil {
			fail(err)
		}
		s, err := note.NewSigner(skey)
		if err != nil {
			fail(err)
		}
		msg, err := note.Sign(&note.Note{Text: os.Args[3]}, s)
		if err != nil {
			fail(err)
		}
		fmt.Println(vkey)
		os.Stdout.Write(msg)
	default:
		fail(fmt.Errorf("no mode %s", os.Args[1]))
	}
}
