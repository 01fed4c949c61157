"""Print `export` lines that give uv the package sources pip is configured with (scripts/setup.sh installs with
uv: on 2 cores it installed the CPU set in 8 s where pip took 56 s). uv reads no pip.conf and no PIP_*
variable, so without this it would ask PyPI alone, and miss a machine's local wheel folder, its extra indexes,
its constraints and its CA bundle. Read with pip's own configuration loader (files and PIP_* variables, as pip
itself sees them); run with the venv's python:  eval "$(.venv/bin/python scripts/uv_env.py)"
"""

from __future__ import annotations

import shlex

# pip's option -> (uv's variable, how uv separates several values)
UV_NAMES = {
    "index-url": ("UV_INDEX_URL", " "),
    "extra-index-url": ("UV_EXTRA_INDEX_URL", " "),
    "find-links": ("UV_FIND_LINKS", ","),
    "constraint": ("UV_CONSTRAINT", " "),
    "cert": ("SSL_CERT_FILE", None),
}


def pip_settings() -> dict[str, str]:
    """pip's options as pip sees them (later sources win: files, then PIP_* variables)."""
    from pip._internal.configuration import Configuration  # pip's own reader: the venv's pip is pinned by venv

    config = Configuration(isolated=False)
    config.load()
    return {key.rsplit(".", 1)[-1]: value for key, value in config.items()}


def exports(settings: dict[str, str]) -> list[str]:
    lines = ["export UV_INDEX_STRATEGY=unsafe-best-match"]  # pip's rule: the best version over every source
    for option, (name, sep) in UV_NAMES.items():
        value = settings.get(option, "").strip()
        if value:
            value = value if sep is None else sep.join(value.split())
            lines.append(f"export {name}={shlex.quote(value)}")
    return lines


if __name__ == "__main__":
    print("\n".join(exports(pip_settings())))
