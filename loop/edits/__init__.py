"""An LLM reply into edits: formats parsed, file names told apart, thinking split off, edits
applied to exact file texts."""
