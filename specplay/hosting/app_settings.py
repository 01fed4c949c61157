"""app.py's options as one typed object (pydantic-settings): defaults < the --config YAML file < the
environment < command-line flags. Every value is checked here, once, whichever source gave it (`port: x`
in a config file and GRADIO_SERVER_PORT=web are refused alike); a refusal is one line (`AppSettings.load`
raises SystemExit with it; app.py exits 2). The config file is read bounded (core.reading: a regular file of
at most 64 KiB, no YAML aliases). Light: no Gradio, vLLM or torch imported here."""

from __future__ import annotations

import os
from typing import Annotated, Any

from pydantic import BeforeValidator, Field, SecretStr, StrictStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from specplay.core.hardware import CORE_LAYOUT_ENV, layout_name
from specplay.core.reading import OPTION_MAX_BYTES, UnreadableInput, load_yaml, read_text
from specplay.hosting.guard import trusted_proxies
from specplay.hosting.room import presenter_key_problem

AUTH_ENV = "PLAYGROUND_AUTH"
PRESENTER_ENV = "PLAYGROUND_PRESENTER_KEY"
TRUSTED_PROXIES_ENV = "PLAYGROUND_TRUSTED_PROXIES"
# On a Hugging Face Space (which sets SPACE_ID) every visitor comes through the platform's proxy, whose
# address is private: untrusted, all visitors shared its 3 places (one visitor's 3 tabs blocked everyone).
# Nothing reaches a Space's container but that proxy, so its private ranges are trusted there by default
# (the proxy appends the visitor's address to X-Forwarded-For; uvicorn takes the rightmost untrusted hop).
SPACE_ENV = "SPACE_ID"
SPACE_PROXIES = "10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,100.64.0.0/10,fc00::/7"
# The environment variables read, each for one option (named ones only: HOST or PORT set for something
# else never reach the page); Gradio's own GRADIO_SERVER_NAME / _PORT, as a Space or a container sets them.
ENVIRONMENT = {"auth": AUTH_ENV, "trusted_proxies": TRUSTED_PROXIES_ENV, "core_layout": CORE_LAYOUT_ENV,
               "host": "GRADIO_SERVER_NAME", "port": "GRADIO_SERVER_PORT", "presenter_key": PRESENTER_ENV}
SECRET = ("auth", "presenter_key")  # a refusal never repeats what was given for these
LOCAL_HOSTS = ("127.0.0.1", "localhost", "::1")


def _names(value):
    """--presets "a,b" (or a YAML list) as a list of names."""
    return [n.strip() for n in value.split(",") if n.strip()] if isinstance(value, str) else value


def _login(value):
    """USER:PASS as (user, password); a pair stays one."""
    if value is None or isinstance(value, tuple):
        return value
    user, sep, password = str(value).partition(":")
    if not (sep and user and password):
        raise ValueError("must look like USER:PASS")
    return user, password


class _Environment(PydanticBaseSettingsSource):
    """The variables of ENVIRONMENT that are set (and SPACE_ID's trusted proxies, when none other is named)."""

    def get_field_value(self, field, field_name):  # pragma: no cover (__call__ reads them all)
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        found = {key: os.environ[name] for key, name in ENVIRONMENT.items() if os.environ.get(name)}
        if "trusted_proxies" not in found and os.environ.get(SPACE_ENV):
            found["trusted_proxies"] = SPACE_PROXIES
        return found


class _ConfigFile(PydanticBaseSettingsSource):
    """The --config YAML file: a mapping of option names, read bounded."""

    def __init__(self, settings_cls, path):
        super().__init__(settings_cls)
        self.path = path

    def get_field_value(self, field, field_name):  # pragma: no cover
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        if not self.path:
            return {}
        data = load_yaml(self.path, OPTION_MAX_BYTES, f"--config: {self.path}") or {}
        if not isinstance(data, dict) or "config" in data:
            raise UnreadableInput(f"--config: {self.path}: expected a mapping of app.py's options")
        return data


class AppSettings(BaseSettings):
    """Every option of app.py; `--help` says what each means (hosting/options.py's parser)."""

    model_config = SettingsConfigDict(extra="forbid", frozen=True)

    config: StrictStr | None = Field(None, exclude=True)  # the YAML file the others may come from
    presets: Annotated[list[StrictStr] | None, BeforeValidator(_names)] = None
    preset: StrictStr | None = None
    host: StrictStr = "127.0.0.1"
    port: int = Field(7860, ge=1, le=65535)
    share: bool = False
    auth: Annotated[tuple[str, str] | None, BeforeValidator(_login)] = None
    auth_file: StrictStr | None = None
    allow_switching: bool | None = None
    allow_bench: bool | None = None
    allow_remote_code: bool = False  # trust_remote_code on a page served to others (presets.engine_args)
    max_run_seconds: float = Field(300.0, gt=0, le=86400)
    queue_size: int = Field(32, ge=1, le=10_000)
    session_capacity: int = Field(128, ge=1, le=100_000)
    core_layout: StrictStr | None = Field(None, validate_default=True)  # None: PLAYGROUND_CORE_LAYOUT, else fair
    trusted_proxies: tuple[str, ...] = ()
    lesson: StrictStr | None = None
    presenter_key: SecretStr | None = None  # a room that watches one run (hosting/room.py); None: no room
    recordings: StrictStr | None = None  # None: the shipped folder (core.paths.RECORDINGS_DIR); "": none
    baseline_url: StrictStr | None = None
    speculative_url: StrictStr | None = None
    server_timeout_s: float = Field(60.0, gt=0, le=3600)
    api_key_env: StrictStr = "VLLM_API_KEY"
    server_pids: StrictStr | None = None
    # the operator's own pair (presets.adhoc reads these by name, as from a command line)
    preset_file: StrictStr | None = None
    model: StrictStr | None = None
    speculative_config: StrictStr | dict | None = None
    dtype: StrictStr = "auto"
    max_model_len: int = Field(4096, ge=64, le=131072)
    load_format: StrictStr = "auto"
    memory_split: StrictStr = "0.4,0.45"

    @classmethod
    def settings_customise_sources(cls, settings_cls, init_settings, env_settings, dotenv_settings,
                                   file_secret_settings):
        # first wins: flags (the init keywords) < ... read right to left: defaults < file < environment < flags
        return init_settings, _Environment(settings_cls), _ConfigFile(settings_cls, init_settings.init_kwargs.get("config"))

    @field_validator("core_layout", mode="after")
    @classmethod
    def _layout(cls, value):
        return layout_name(value)

    @field_validator("presenter_key", mode="after")
    @classmethod
    def _presenter(cls, value):
        if value is not None and (problem := presenter_key_problem(value.get_secret_value())):
            raise ValueError(problem)
        return value

    @field_validator("trusted_proxies", mode="before")
    @classmethod
    def _proxies(cls, value):
        return trusted_proxies(value)

    @model_validator(mode="after")
    def _both_servers(self):
        if bool(self.baseline_url) != bool(self.speculative_url):
            raise ValueError("remote mode needs both --baseline-url and --speculative-url")
        return self

    @property
    def remote(self) -> bool:
        return bool(self.baseline_url)

    @property
    def public(self) -> bool:
        return self.share or self.host not in LOCAL_HOSTS

    @classmethod
    def load(cls, flags: dict) -> "AppSettings":
        """The settings from the command line's given `flags` (None: not given) over the environment, the
        --config file and the defaults; SystemExit with one line naming the option when one is refused."""
        given = {k: v for k, v in flags.items() if v is not None}
        try:
            settings = cls(**given)
            return settings._with_auth_file(given)
        except ValidationError as exc:
            raise SystemExit(f"app.py: {_one_line(exc)}") from None
        except (UnreadableInput, ValueError) as exc:
            raise SystemExit(f"app.py: {' '.join(str(exc).split())}") from None

    def _with_auth_file(self, given: dict) -> "AppSettings":
        """--auth-file's first line as the login: --auth on the command line still wins, and a config file's
        --auth-file yields to PLAYGROUND_AUTH."""
        if not self.auth_file or "auth" in given or ("auth_file" not in given and os.environ.get(AUTH_ENV)):
            return self
        try:
            first = read_text(self.auth_file, OPTION_MAX_BYTES, f"--auth-file: {self.auth_file}").partition("\n")[0]
        except UnreadableInput as exc:
            raise SystemExit(f"app.py: {exc}") from None
        try:
            return self.model_copy(update={"auth": _login(first.strip())})
        except ValueError:
            raise SystemExit("app.py: --auth-file: its first line must look like USER:PASS") from None


def _one_line(exc: ValidationError) -> str:
    """The first error as `--option: what was wrong (got ...)`, one line."""
    error = exc.errors()[0]
    name = "--" + str(error["loc"][0]).replace("_", "-") if error["loc"] else "options"
    if error["type"] == "extra_forbidden":
        return f"{name[2:]}: not an option of app.py (--config keys are the flags' names with _ for -)"
    message = error["msg"].removeprefix("Value error, ")
    if error["loc"] and error["loc"][0] in ENVIRONMENT:
        name += f" (or {ENVIRONMENT[error['loc'][0]]})"
    if error["loc"] and error["loc"][0] in SECRET:  # a login or a key: not echoed into a log
        return f"{name}: {message}"
    got = str(error.get("input"))[:40]
    return " ".join(f"{name}: {message}, got {got!r}".split())
