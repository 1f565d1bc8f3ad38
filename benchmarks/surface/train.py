"""The editable side of the `surface` task: five constants; the rest is protected."""
from surface import report

A = 4.0
B = 0.6
C = 2.5
D = 0.15
E = 5.0
F = 1.0
G = 2.0
H = 0.5
I = 3.0
J = 0.2
K = 8.0
L = 1.5

report({"A": A, "B": B, "C": C, "D": D, "E": E, "F": F, "G": G, "H": H, "I": I, "J": J,
        "K": K, "L": L})
