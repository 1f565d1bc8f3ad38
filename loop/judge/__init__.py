"""The decision, pure: keep, discard or rerun a candidate, the statistics it uses, and the
loop's measurements of the best."""
