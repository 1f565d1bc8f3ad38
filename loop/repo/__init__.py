"""The git side: a branch per tag, worktrees, attempt commits, replay, restore; every git call
hardened."""
