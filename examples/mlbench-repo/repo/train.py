"""tinyfit's training entry point (a stand-in: it records what it was asked to do)."""
import argparse
import json

p = argparse.ArgumentParser()
p.add_argument("--model", choices=["linear", "mlp"], required=True)
p.add_argument("--epochs", type=int, default=1)
p.add_argument("--lr", type=float, default=0.01)
p.add_argument("--out", default="results.json")
a = p.parse_args()
loss = round(1.0 / (a.epochs * (2 if a.model == "mlp" else 1)) + abs(a.lr - 0.01), 6)
with open(a.out, "w") as f:
    json.dump({"model": a.model, "epochs": a.epochs, "lr": a.lr, "loss": loss}, f)
print(f"trained {a.model} for {a.epochs} epochs, loss {loss}")
