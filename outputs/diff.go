package outputs

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
)

// inMemory is the largest changed file whose hunk is narrowed to what
// changed; a larger one is shown replaced whole, read twice from disk.
const inMemory = 8 << 20

// writeEntry writes e's part of a git-style unified diff of the
// workspace against its baseline (the walk hands the entries over in path
// order, as git sorts them); a seeded file larger than budget is not read
// (the diff could not hold it).
func writeEntry(w *bufio.Writer, e *entry, budget int64) error {
	var old string
	if e.op == opDelete || e.op == opModify {
		var err error
		if old, err = readBase(e.base, e.rel, e.name, e.seed, budget); err != nil {
			return err
		}
	}
	switch e.op {
	case opDelete:
		return diffDelete(w, e.rel, e.seed, old)
	case opAdd:
		return diffAdd(w, e)
	}
	return diffModify(w, e, old)
}

func mode(e *entry) string { return baseEntry{link: e.link, exec: e.exec}.mode() }

func header(w *bufio.Writer, rel string) {
	fmt.Fprintf(w, "diff --git %s %s\n", quoteGit("a/", rel), quoteGit("b/", rel))
}

func diffDelete(w *bufio.Writer, rel string, b baseEntry, old string) error {
	header(w, rel)
	fmt.Fprintf(w, "deleted file mode %s\n", b.mode())
	if old == "" {
		return nil
	}
	if b.link {
		fmt.Fprintf(w, "--- %s\n+++ /dev/null\n@@ -1 +0,0 @@\n-%s\n\\ No newline at end of file\n", quoteGit("a/", rel), old)
		return nil
	}
	if strings.IndexByte(old[:min(len(old), 8000)], 0) >= 0 {
		fmt.Fprintf(w, "Binary files %s and /dev/null differ\n", quoteGit("a/", rel))
		return nil
	}
	fmt.Fprintf(w, "--- %s\n+++ /dev/null\n", quoteGit("a/", rel))
	fmt.Fprintf(w, "@@ -1%s +0,0 @@\n", count(lineCount(old)))
	linesOf(w, '-', []byte(old))
	return nil
}

func diffAdd(w *bufio.Writer, e *entry) error {
	header(w, e.rel)
	fmt.Fprintf(w, "new file mode %s\n", mode(e))
	if e.link {
		fmt.Fprintf(w, "--- /dev/null\n+++ %s\n@@ -0,0 +1 @@\n+%s\n\\ No newline at end of file\n", quoteGit("b/", e.rel), e.target)
		return nil
	}
	if e.size == 0 {
		return nil
	}
	if e.size > inMemory {
		return diffBig(w, e, "", false)
	}
	cur, err := readExact(e)
	if err != nil {
		return err
	}
	if binary(cur) {
		fmt.Fprintf(w, "Binary files /dev/null and %s differ\n", quoteGit("b/", e.rel))
		return nil
	}
	fmt.Fprintf(w, "--- /dev/null\n+++ %s\n@@ -0,0 +1%s @@\n", quoteGit("b/", e.rel), count(lineCount(string(cur))))
	linesOf(w, '+', cur)
	return nil
}

func diffModify(w *bufio.Writer, e *entry, old string) error {
	header(w, e.rel)
	if e.exec != e.seed.exec {
		fmt.Fprintf(w, "old mode %s\nnew mode %s\n", e.seed.mode(), mode(e))
	}
	if e.size > inMemory {
		return diffBig(w, e, old, true)
	}
	cur, err := readExact(e)
	if err != nil {
		return err
	}
	if string(cur) == old {
		return nil // a mode change alone has no hunk
	}
	if binary(cur) || binary([]byte(old[:min(len(old), 8000)])) {
		fmt.Fprintf(w, "Binary files %s and %s differ\n", quoteGit("a/", e.rel), quoteGit("b/", e.rel))
		return nil
	}
	fmt.Fprintf(w, "--- %s\n+++ %s\n", quoteGit("a/", e.rel), quoteGit("b/", e.rel))
	a, b := splitLines(old), splitLines(string(cur))
	writeHunks(w, a, b, script(a, b))
	return nil
}

// diffBig shows a file too large to hold whole as added, or as replacing
// old, reading it twice (to count its lines, then to write them).
func diffBig(w *bufio.Writer, e *entry, old string, modified bool) error {
	f, _, err := e.open()
	if err != nil {
		return err
	}
	head := make([]byte, 8000)
	n, err := io.ReadFull(f, head)
	f.Close()
	if err != nil && err != io.ErrUnexpectedEOF {
		return err
	}
	from := "/dev/null"
	if modified {
		from = quoteGit("a/", e.rel)
	}
	if binary(head[:n]) || binary([]byte(old[:min(len(old), 8000)])) {
		fmt.Fprintf(w, "Binary files %s and %s differ\n", from, quoteGit("b/", e.rel))
		return nil
	}
	lc, err := countFile(e)
	if err != nil {
		return err
	}
	oldRange := "0,0"
	if modified {
		oldRange = "1" + count(lineCount(old))
	}
	fmt.Fprintf(w, "--- %s\n+++ %s\n@@ -%s +1%s @@\n", from, quoteGit("b/", e.rel), oldRange, count(lc))
	linesOf(w, '-', []byte(old))
	return fileLines(w, '+', e)
}

// binary reports whether b (a file's start) has a NUL in its first 8000
// bytes, as git decides.
func binary(b []byte) bool { return bytes.IndexByte(b[:min(len(b), 8000)], 0) >= 0 }

// readExact reads e's file whole, failing if its size changed since the
// walk.
func readExact(e *entry) ([]byte, error) {
	f, _, err := e.open()
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cur, err := io.ReadAll(io.LimitReader(f, e.size+1))
	if err != nil {
		return nil, err
	}
	if int64(len(cur)) != e.size {
		return nil, fmt.Errorf("%s changed size while captured", shortPath(e.rel))
	}
	return cur, nil
}

// contextLines is the lines of context around a change, as diff -u.
const contextLines = 3

// edit is one line of an edit script: kept (' '), deleted ('-', a's line
// ai) or inserted ('+', b's line bi).
type edit struct {
	kind   byte
	ai, bi int
}

// maxEdits bounds the Myers search; a change larger than that is shown as
// a replacement of the lines between the common head and tail.
const maxEdits = 1000

// script is an edit script turning a into b: the common head and tail
// kept, and between them the shortest script (Myers) when it has at most
// maxEdits edits, else a replacement.
func script(a, b []string) []edit {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	ops := make([]edit, 0, len(a)+len(b)-pre-suf)
	for i := range pre {
		ops = append(ops, edit{' ', i, i})
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]
	if mid, ok := myers(ma, mb); ok {
		for _, e := range mid {
			ops = append(ops, edit{e.kind, e.ai + pre, e.bi + pre})
		}
	} else {
		for i := range ma {
			ops = append(ops, edit{'-', pre + i, 0})
		}
		for i := range mb {
			ops = append(ops, edit{'+', 0, pre + i})
		}
	}
	for i := range suf {
		ops = append(ops, edit{' ', len(a) - suf + i, len(b) - suf + i})
	}
	return ops
}

// myers is the shortest edit script from a to b, if it has at most
// maxEdits edits.
func myers(a, b []string) ([]edit, bool) {
	n, m := len(a), len(b)
	limit := min(n+m, maxEdits)
	off := limit + 1
	v := make([]int, 2*limit+3)
	var trace [][]int
	for d := 0; d <= limit; d++ {
		trace = append(trace, slices.Clone(v))
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1]
			} else {
				x = v[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x, y = x+1, y+1
			}
			v[off+k] = x
			if x >= n && y >= m {
				return backtrack(trace, off, n, m), true
			}
		}
	}
	return nil, false
}

func backtrack(trace [][]int, off, x, y int) []edit {
	var ops []edit
	for d := len(trace) - 1; d > 0; d-- {
		v := trace[d]
		k := x - y
		prevK := k - 1
		if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
			prevK = k + 1
		}
		prevX := v[off+prevK]
		prevY := prevX - prevK
		for x > prevX && y > prevY {
			ops = append(ops, edit{' ', x - 1, y - 1})
			x, y = x-1, y-1
		}
		if x == prevX {
			ops = append(ops, edit{'+', 0, y - 1})
		} else {
			ops = append(ops, edit{'-', x - 1, 0})
		}
		x, y = prevX, prevY
	}
	for x > 0 && y > 0 {
		ops = append(ops, edit{' ', x - 1, y - 1})
		x, y = x-1, y-1
	}
	slices.Reverse(ops)
	return ops
}

// writeHunks writes ops as unified diff hunks with contextLines of context,
// joining changes closer than twice that.
func writeHunks(w *bufio.Writer, a, b []string, ops []edit) {
	// aAt[i], bAt[i]: lines of a and b before ops[i].
	aAt, bAt := make([]int, len(ops)+1), make([]int, len(ops)+1)
	for i, o := range ops {
		aAt[i+1], bAt[i+1] = aAt[i], bAt[i]
		if o.kind != '+' {
			aAt[i+1]++
		}
		if o.kind != '-' {
			bAt[i+1]++
		}
	}
	for i := 0; i < len(ops); {
		for i < len(ops) && ops[i].kind == ' ' {
			i++
		}
		if i == len(ops) {
			return
		}
		from, end := max(0, i-contextLines), i
		for {
			for end < len(ops) && ops[end].kind != ' ' {
				end++
			}
			next := end
			for next < len(ops) && ops[next].kind == ' ' {
				next++
			}
			if next == len(ops) || next-end > 2*contextLines {
				break
			}
			end = next
		}
		to := min(len(ops), end+contextLines)
		fmt.Fprintf(w, "@@ -%s +%s @@\n", rangeOf(aAt[from], aAt[to]-aAt[from]), rangeOf(bAt[from], bAt[to]-bAt[from]))
		for _, o := range ops[from:to] {
			switch o.kind {
			case ' ', '-':
				writeLine(w, o.kind, a[o.ai])
			default:
				writeLine(w, '+', b[o.bi])
			}
		}
		i = to
	}
}

// rangeOf is a hunk range: "l,s", with l the first line (1-based; the line
// before for an empty range).
func rangeOf(start, n int) string {
	switch n {
	case 0:
		return fmt.Sprintf("%d,0", start)
	case 1:
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

func writeLine(w *bufio.Writer, mark byte, line string) {
	w.WriteByte(mark)
	if strings.HasSuffix(line, "\n") {
		w.WriteString(line)
		return
	}
	w.WriteString(line)
	w.WriteString("\n\\ No newline at end of file\n")
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	parts := strings.SplitAfter(s, "\n")
	if parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	return parts
}

// count is a hunk's line count suffix after "1" ("" for one line).
func count(n int) string {
	if n == 1 {
		return ""
	}
	return fmt.Sprintf(",%d", n)
}

func lineCount(s string) int {
	n := strings.Count(s, "\n")
	if s != "" && !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}

// countFile counts the lines of e's file, reading no more than its size.
func countFile(e *entry) (int, error) {
	f, _, err := e.open()
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	n, last, total := 0, byte('\n'), int64(0)
	for {
		k, err := f.Read(buf)
		total += int64(k)
		n += bytes.Count(buf[:k], []byte{'\n'})
		if k > 0 {
			last = buf[k-1]
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, err
		}
	}
	if total != e.size {
		return 0, fmt.Errorf("%s changed size while captured", shortPath(e.rel))
	}
	if last != '\n' {
		n++
	}
	return n, nil
}

func fileLines(w *bufio.Writer, mark byte, e *entry) error {
	f, _, err := e.open()
	if err != nil {
		return err
	}
	defer f.Close()
	return lines(w, mark, io.LimitReader(f, e.size))
}

// linesOf writes every line of b prefixed by mark.
func linesOf(w *bufio.Writer, mark byte, b []byte) {
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			w.WriteByte(mark)
			w.Write(b)
			w.WriteString("\n\\ No newline at end of file\n")
			return
		}
		w.WriteByte(mark)
		w.Write(b[:i+1])
		b = b[i+1:]
	}
}

// lines writes every line of r prefixed by mark, without holding a whole
// line in memory.
func lines(w *bufio.Writer, mark byte, r io.Reader) error {
	br := bufio.NewReaderSize(r, 64<<10)
	start := true
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			if start {
				w.WriteByte(mark)
			}
			w.Write(chunk)
			start = chunk[len(chunk)-1] == '\n'
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err == io.EOF {
			if !start {
				w.WriteString("\n\\ No newline at end of file\n")
			}
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// quoteGit is prefix+p as git writes a path in a diff: as is when plain,
// else double-quoted with C escapes and octal for every byte that is not
// printable ASCII (core.quotePath), so a name with a newline or invalid
// UTF-8 cannot break the patch apart.
func quoteGit(prefix, p string) string {
	plain := true
	for i := 0; i < len(p); i++ {
		if c := p[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			plain = false
			break
		}
	}
	if plain {
		return prefix + p
	}
	var b strings.Builder
	b.WriteByte('"')
	b.WriteString(prefix)
	for i := 0; i < len(p); i++ {
		switch c := p[i]; c {
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		default:
			if c < 0x20 || c >= 0x7f {
				fmt.Fprintf(&b, `\%03o`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}
