"""``python -m scheduler.cli``: the same as the ``pact`` command."""

from scheduler.cli import main

if __name__ == "__main__":
    main()
