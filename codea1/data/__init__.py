"""Problems: the one `Problem` type, loaders for the data sets users bring, and the
bundled problem set.

    from codea1.data import Problem, load_problems, bundled_problems, save_problems
"""

from codea1.data.bundled import bundled_problems, bundled_split
from codea1.data.files import load_problems, save_problems
from codea1.data.formats import FORMATS
from codea1.data.problem import Problem, ProblemFormatError

__all__ = ["FORMATS", "Problem", "ProblemFormatError", "bundled_problems", "bundled_split", "load_problems", "save_problems"]
