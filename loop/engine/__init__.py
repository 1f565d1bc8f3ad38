"""The loop: its parts built in one place, a candidate's life as a pure state machine, the
event loop that carries it out, recovery, slots, the prompt context and the record sink."""
