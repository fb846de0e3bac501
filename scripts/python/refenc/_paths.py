# Where an installed refenc keeps its program and its golden cases.  In the
# source tree both are None (locate.py then looks in the tree); `make
# install-python` writes the installed paths here.
CLI = None
GOLDEN = None
