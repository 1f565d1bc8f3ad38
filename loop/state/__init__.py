"""The engine's own state: the append-only journal, its projections (MLflow, results.tsv), and
the check that a run left them as they were."""
