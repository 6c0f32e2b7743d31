"""Writing a benchmark's Markdown report."""

import os


def write_report(path: str, lines: list[str]):
  """Writes the report (creating its folder) and says where."""
  os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
  with open(path, "w") as f:
    f.write("\n".join(lines) + "\n")
  print(f"wrote {path}")
