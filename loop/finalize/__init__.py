"""`autoresearch finalize --tag T`: the morning after a night. Which kept changes the final
gain depends on, measured with the night's own parts (the backend and scheduler run the
runs, the judge's statistics and confidence decide, a journal makes it resumable), and a
branch to merge, `autoresearch/<tag>-final`, holding only those.

plan.py (pure: what the diffs alone decide), estimate.py (pure: pairs of runs -> an
interval), measure.py (runs, journalled), morning.py (puts them together), report.py."""
