import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # the shared test doubles in cfrag_doubles.py
