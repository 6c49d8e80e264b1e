"""The reply guard: a reply judged within its conversation. Claimed actions and lookups no
tool performed, tool calls typed as text, values no source gave, and loops."""
