"""`python -m evalkit.cli`: the `evalkit` command, as the tests and bench/ start it in a child process.

Guarded, so that importing every module of the package (the tests' zygote, the light-start check) runs nothing.
"""

from evalkit.cli import entry

if __name__ == "__main__":
    entry()
