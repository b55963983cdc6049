import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # the shared run directories in report_doubles.py
