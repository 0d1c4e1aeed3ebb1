"""Code-A1: adversarial co-evolution of a code LLM and a test LLM (arXiv 2603.15611).

Data flows one way: problems (`codea1.data`) -> rollouts (`codea1.rollout`) -> judge
(`codea1.judge`, running code in `codea1.sandbox`) -> rewards -> Mistake Book
(`codea1.mistakes`) -> GRPO updates (`codea1.grpo`) -> checkpoints and metrics
(`codea1.train`). Evaluation lives in `codea1.eval`, figures in `codea1.plot`.
"""

__version__ = "0.1.0"
