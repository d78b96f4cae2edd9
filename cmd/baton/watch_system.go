package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// systemFields is a Claude Code `system` line: a subtype and fields that
// depend on it (task_started, task_progress, task_notification,
// session_state_changed, api_retry, hook_*, compact_boundary, status, …;
// the list grows with every release).
type systemFields map[string]json.RawMessage

// str is field k as text: a string as is, a number or bool as JSON, else "".
func (f systemFields) str(k string) string {
	raw, ok := f[k]
	if !ok {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return sanitize([]byte(s), false)
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	var b bool
	if json.Unmarshal(raw, &b) == nil {
		return fmt.Sprint(b)
	}
	return ""
}

// sub is the object in field k (usage, compact_metadata), or nil.
func (f systemFields) sub(k string) systemFields {
	var s systemFields
	if json.Unmarshal(f[k], &s) != nil {
		return nil
	}
	return s
}

// pairs renders "k=v" for each field that has a value, under its label.
func pairs(f systemFields, keys ...[2]string) string {
	var out []string
	for _, k := range keys {
		if v := f.str(k[0]); v != "" {
			out = append(out, k[1]+"="+cut(v, 80))
		}
	}
	return strings.Join(out, " ")
}

// usage is a task's usage object: tool uses, tokens, time.
func usage(u systemFields) string {
	if u == nil {
		return ""
	}
	var out []string
	if v := u.str("tool_uses"); v != "" {
		out = append(out, "tools="+v)
	}
	if v := u.str("total_tokens"); v != "" {
		out = append(out, "tokens="+v)
	}
	var ms float64
	if json.Unmarshal(u["duration_ms"], &ms) == nil && ms > 0 {
		out = append(out, fmt.Sprintf("%.1fs", ms/1000))
	}
	return strings.Join(out, " ")
}

// systemLine renders a Claude Code `system` line as one readable line:
// what happened, then the fields that say more. It reports false for a
// line with no subtype, which is then shown as JSON.
func (p *eventPrinter) systemLine(line []byte) bool {
	var f systemFields
	if json.Unmarshal(line, &f) != nil {
		return false
	}
	var subtype string
	if json.Unmarshal(f["subtype"], &subtype) != nil || subtype == "" {
		return false
	}
	subtype = sanitize([]byte(subtype), false)
	head, text, rest := strings.ReplaceAll(subtype, "_", " "), "", ""
	switch subtype {
	case "init":
		head = "session"
		var tools []json.RawMessage
		_ = json.Unmarshal(f["tools"], &tools)
		rest = pairs(f, [2]string{"model", "model"}, [2]string{"permissionMode", "permissions"},
			[2]string{"cwd", "cwd"}, [2]string{"claude_code_version", "version"}, [2]string{"prompt", "prompt"})
		if len(tools) > 0 {
			rest += fmt.Sprintf(" tools=%d", len(tools))
		}
	case "task_started":
		text = f.str("description")
		rest = pairs(f, [2]string{"task_type", "type"}, [2]string{"subagent_type", "agent"}, [2]string{"task_id", "id"})
	case "task_progress":
		text = f.str("description")
		rest = usage(f.sub("usage"))
	case "task_notification":
		head = "task " + f.str("status")
		text = f.str("summary")
		rest = strings.TrimSpace(usage(f.sub("usage")) + " " + pairs(f, [2]string{"task_id", "id"}))
	case "session_state_changed":
		head = "session " + f.str("state")
		rest = pairs(f, [2]string{"waiting_on_user", "waiting_on_user"})
	case "api_retry":
		head = "API retry " + f.str("attempt") + "/" + f.str("max_retries")
		text = strings.TrimSpace(f.str("error_status") + " " + f.str("error"))
		var ms float64
		if json.Unmarshal(f["retry_delay_ms"], &ms) == nil && ms > 0 {
			rest = fmt.Sprintf("in %.1fs", ms/1000)
		}
	case "status":
		text = f.str("status")
	case "compact_boundary":
		head = "context compacted"
		meta := f.sub("compact_metadata")
		if meta == nil {
			meta = f.sub("compactMetadata")
		}
		rest = pairs(meta, [2]string{"trigger", "trigger"}, [2]string{"pre_tokens", "tokens_before"})
	case "hook_started", "hook_progress", "hook_response":
		text = strings.TrimSpace(f.str("hook_event") + " " + f.str("hook_name"))
		rest = pairs(f, [2]string{"exit_code", "exit"}, [2]string{"outcome", "outcome"})
	default:
		// A subtype this printer does not know yet: its plain fields.
		var keys []string
		for k := range f {
			switch k {
			case "type", "subtype", "session_id", "uuid", "timestamp":
			default:
				if f.str(k) != "" {
					keys = append(keys, k)
				}
			}
		}
		slices.Sort(keys)
		var ps [][2]string
		for _, k := range keys {
			ps = append(ps, [2]string{k, k})
		}
		rest = pairs(f, ps...)
	}
	s := "⚙ " + head
	if text != "" {
		s += ": " + cut(text, 160)
	}
	if rest = strings.TrimSpace(rest); rest != "" {
		s += "  " + rest
	}
	p.line(p.paint(styleDim, s))
	return true
}
