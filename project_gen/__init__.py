"""kiln.project_gen: firmware projects for a board, their build, and running them.

    from kiln.project_gen import create_project
    p = create_project(art, board="mps2-an386", out_dir="fw/")   # or a .tflite path
    p.build()                 # make; returns the size report
    r = p.run(x)              # QEMU or host: r.outputs, r.cycles (instructions on QEMU)
"""

from .boards import Board, get_board, list_boards
from .console import RunResult
from .project import Project, create_project
from .sizes import SizeReport

__all__ = ["Board", "get_board", "list_boards", "Project", "create_project", "RunResult",
           "SizeReport"]
