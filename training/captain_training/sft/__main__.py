"""``python -m captain_training.sft`` (the form torchrun launches): the ``captain sft`` commands."""

from captain_training.sft.cli import app

if __name__ == "__main__":
    app(prog_name="captain sft")
