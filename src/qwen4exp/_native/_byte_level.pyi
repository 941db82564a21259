import numpy as np
import numpy.typing as npt

def byte_level_ends(text: str) -> tuple[bytes, npt.NDArray[np.int64]]: ...
