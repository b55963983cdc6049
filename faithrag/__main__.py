import sys

from faithrag.cli import main

sys.exit(main())
