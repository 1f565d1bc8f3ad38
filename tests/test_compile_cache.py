"""Nothing the training step writes is loaded by the grader as compiled code: torch.compile's
and Triton's caches (TORCHINDUCTOR_CACHE_DIR, TRITON_CACHE_DIR) are the grader's own, empty
and gone with it, never the training step's (kept across runs in the data cache)."""
import os
import textwrap

import pytest

from conftest import run_cli
from graded_toy import EVALUATE, TRAIN, make_graded_repo

# The edit's attack: a "compiled kernel" in every cache folder it is told of, and where
# those folders are, for the grader to look.
PLANTING_TRAIN = TRAIN + textwrap.dedent("""
    import json
    seen = {}
    for var in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
        folder = os.environ[var]
        os.makedirs(folder, exist_ok=True)
        open(os.path.join(folder, "planted_kernel.py"), "w").write("print('pwned')\\n")
        seen[var] = folder
    json.dump(seen, open(os.path.join(os.environ["AUTORESEARCH_ARTIFACT_DIR"], "caches.json"), "w"))
    """)

# The protected grader refuses to score when its caches hold the training step's plant.
CHECKING_EVALUATE = textwrap.dedent("""
    import json, os
    art = os.environ["AUTORESEARCH_ARTIFACT_DIR"]
    train_caches = json.load(open(os.path.join(art, "caches.json")))
    for var, folder in train_caches.items():
        mine = os.environ[var]
        print(f"{var}: grader {mine} training {folder}")
        if os.path.realpath(mine) == os.path.realpath(folder):
            raise SystemExit(f"the grader's {var} is the training step's")
        if os.path.exists(os.path.join(mine, "planted_kernel.py")):
            raise SystemExit(f"the training step's kernel is in the grader's {var}")
        open(os.path.join(mine, "grader_kernel.py"), "w").write("x")   # writable to it
    """) + EVALUATE


@pytest.mark.parametrize("sandbox", ["auto", "off"])
def test_the_grader_never_sees_the_training_steps_compile_cache(tmp_path, sandbox):
    repo, _ = make_graded_repo(tmp_path, train=PLANTING_TRAIN)
    (repo / "task" / "evaluate.py").write_text(CHECKING_EVALUATE)
    from conftest import git
    git(repo, "-c", "user.name=T", "-c", "user.email=t@e", "commit", "-qam", "checking grader")
    cache = tmp_path / "cache"
    env = {**os.environ, "AUTORESEARCH_CACHE": str(cache)}
    done = run_cli("check-task", ".", "--sandbox", sandbox, cwd=repo / "task", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "status ok; error = " in done.stdout
    # the training step's cache is kept for the next training step; the grader's is gone
    assert (cache / "compile" / "inductor" / "planted_kernel.py").exists()
    assert not list(cache.rglob("grader_kernel.py"))
