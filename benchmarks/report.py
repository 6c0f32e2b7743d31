"""Writing a benchmark's Markdown report."""

import json
import os


def write_report(path: str, lines: list[str]):
  """Writes the report (creating its folder) and says where."""
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  with open(path, "w") as f:
    f.write("\n".join(lines) + "\n")
  print(f"wrote {path}")


def write_json(report_path: str, data: dict):
  """Writes the raw numbers beside the report (`<report>.json`), for the
  suite's summary and plots."""
  path = os.path.splitext(report_path)[0] + ".json"
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  with open(path, "w") as f:
    json.dump(data, f, indent=1, default=float)
