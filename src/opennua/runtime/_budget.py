"""One budget per execution, shared by the agent and all its sub-agents: a deadline, model
steps, tokens and a cost in USD, checked before every model call and every tool call.

Cost comes from pydantic-ai's price integration (`ModelResponse.cost()`, the maintained
`genai-prices` table), from what each committed response says it used: a resumed execution
prices the same responses the same way. Scripted models are free; a response no price is
known for counts nothing until a cost limit is set, and then it stops the execution rather
than letting it run unmetered.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

from pydantic_ai.messages import ModelResponse

from opennua.runtime._control import Stop
from opennua.runtime._env import Limits
from opennua.runtime._prices import FREE_PROVIDERS
from opennua.runtime._state import ExecState


class Budget:
    def __init__(self, limits: Limits, wall_clock: Callable[[], float]) -> None:
        self._limits = limits
        self._wall_clock = wall_clock
        #: Per run: responses priced so far and their sum (a run's messages only grow).
        self._priced: dict[str, tuple[int, Decimal]] = {}
        self._unpriced: str | None = None

    def cost(self, state: ExecState) -> Decimal:
        """USD spent by every committed response of the execution."""
        total = Decimal(0)
        for run in state.runs.values():
            responses = [m for m in run.messages if isinstance(m, ModelResponse)]
            seen, spent = self._priced.get(run.run_id, (0, Decimal(0)))
            for response in responses[seen:]:
                spent += self._price(response)
            self._priced[run.run_id] = (len(responses), spent)
            total += spent
        return total

    def _price(self, response: ModelResponse) -> Decimal:
        if response.provider_name in FREE_PROVIDERS:
            return Decimal(0)
        try:
            return response.cost().total_price
        except (LookupError, ValueError, AssertionError):
            self._unpriced = self._unpriced or f"{response.provider_name}:{response.model_name}"
            return Decimal(0)

    def can_issue(self, state: ExecState) -> bool:
        return state.model_calls < self._limits.max_steps and self.spent(state) is None

    def check_model_call(self, state: ExecState) -> None:
        if state.model_calls >= self._limits.max_steps:
            raise Stop("max_steps", "max_steps", self._message(state, "max_steps"))
        self.check_tool_call(state)

    def check_tool_call(self, state: ExecState) -> None:
        """Steps are model responses: a tool call of the last allowed one still runs."""
        limit = self.spent(state)
        if limit is not None:
            reason = "deadline_exceeded" if limit == "deadline" else "failed"
            raise Stop(reason, limit, self._message(state, limit))

    def spent(self, state: ExecState) -> str | None:
        """The limit the execution has reached (deadline, max_tokens, max_cost_usd)."""
        limits = self._limits
        if limits.deadline is not None and self._wall_clock() >= limits.deadline:
            return "deadline"
        if limits.max_tokens is not None and _tokens(state) >= limits.max_tokens:
            return "max_tokens"
        if limits.max_cost_usd is not None:
            cost = self.cost(state)
            if self._unpriced is not None or cost >= Decimal(str(limits.max_cost_usd)):
                return "max_cost_usd"
        return None

    def _message(self, state: ExecState, limit: str) -> str:
        limits = self._limits
        reached = {
            "deadline": f"reached its deadline ({limits.deadline})",
            "max_steps": f"reached max_steps ({limits.max_steps} model steps)",
            "max_tokens": f"reached max_tokens ({limits.max_tokens})",
            "max_cost_usd": f"reached max_cost_usd (${limits.max_cost_usd})",
        }[limit]
        if limit == "max_cost_usd" and self._unpriced is not None:
            reached = f"cannot enforce max_cost_usd: no price is known for {self._unpriced}"
        return (
            f"The execution {reached}; used {state.model_calls} steps, {_tokens(state)} tokens, "
            f"${self.cost(state):.6f}."
        )


def _tokens(state: ExecState) -> int:
    total = state.usage_total()
    return total["input_tokens"] + total["output_tokens"]
