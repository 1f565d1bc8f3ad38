"""What a training script and the files it reads say about themselves, read without running
them (`ast`, regexes, the one YAML reader): the numbers it prints, its settings, the flags it
declares, a Hydra app's config, the code its metric is computed from, whether it prints inside
its loop, the HOME caches it names, its seeds. `init` reads a repo with it; setup checks and
resolves a task with it; the proposers find and rewrite settings with it. Pure: imports no
engine layer."""
