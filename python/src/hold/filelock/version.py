"""filelock's ``filelock.version`` submodule: the version of filelock's
API that ``hold.filelock`` provides (hold's own is ``hold.__version__``)."""

from . import __version__

#: The same as ``__version__``.
version = __version__

__all__ = ["__version__", "version"]
