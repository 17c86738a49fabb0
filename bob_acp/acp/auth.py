"""Sign-in as registry clients understand it (with `acp.auth`, on in the full profile).

Bob has no account to log in to: "authenticated" means a model Bob can use is configured. So:

- a client that can run a terminal sign-in (`clientCapabilities.auth.terminal`, or the older
  `_meta["terminal-auth"]`) is offered a `terminal` method that runs Bob's own command with
  `setup` appended (`bob-acp setup`: provider, model and key, checked, written to the config);
- any other client is offered an `agent` method, whose `authenticate` succeeds once a usable model
  is configured and otherwise says which variable to set and which command to run;
- while no usable model is configured, session methods answer `-32000` (authentication
  required) with that message, so the client opens its sign-in flow; once one is, nothing asks.
"""

from __future__ import annotations

from bob_acp.jsontext import mapping

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from bob_acp.config import Config

SETUP_METHOD = "bob-setup"
MODEL_METHOD = "bob-model"


def terminal_auth_wanted(capabilities: dict[str, Any]) -> bool:
    auth = mapping(capabilities.get("auth"))
    meta = mapping(capabilities.get("_meta"))
    return auth.get("terminal") is True or meta.get("terminal-auth") is True


def methods(terminal: bool, usable: bool) -> list[dict[str, Any]]:
    """The sign-in methods: a terminal one where the client runs it; else one that signs in with
    the configured model, or, while none is configured, says how to configure one."""
    from bob_acp.config.launch import launch_command, setup_words

    if terminal:
        launch = launch_command()
        return [{
            "id": SETUP_METHOD, "name": "Set up a model for Bob", "type": "terminal", "args": ["setup"],
            "description": "Choose a provider and a model, give the key; Bob checks that the model answers.",
            # Clients from before the `terminal` type read the command from here (Zed's banner).
            "_meta": {"terminal-auth": {"command": launch[0], "args": [*launch[1:], "setup"],
                                        "label": "bob-acp setup"}},
        }]
    if usable:
        return [{"id": MODEL_METHOD, "name": "Use the configured model",
                 "description": "Bob uses the model and key of its config file or environment; "
                                f"`{setup_words()}` in a terminal writes them."}]
    return [{"id": MODEL_METHOD, "name": "Sign in once a model is set up",
             "description": f"No model is configured yet: run `{setup_words()}` in a terminal (or set the API key's "
                            "variable in the environment the editor starts Bob with), then sign in."}]


def required_message(cfg: Config) -> str:
    """Why a session cannot start yet, and what to do, in one paragraph."""
    from bob_acp.config import keys

    variable = keys.api_key_env(cfg) or "model.script"
    from bob_acp.config.launch import setup_words

    return (f"Bob has no usable model: set {variable} in the environment the editor starts Bob with "
            f"(or model.apiKeyFile, or model.baseUrl for a local server), or run `{setup_words()}` in a terminal "
            "(or your editor's sign-in); then try again.")
