"""Evaluation: pass@k of code models, pass@k / mut@k of test models, the mutation engine."""

from codea1.eval.mutation import FAMILIES, Mutant, generate_mutants
from codea1.passk import aggregate, avg_at_n, default_ks, pass_at_k

__all__ = ["FAMILIES", "Mutant", "aggregate", "avg_at_n", "default_ks", "generate_mutants", "pass_at_k"]
