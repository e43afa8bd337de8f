"""runs.stream: whether a run's segments ask the model for streamed responses and publish the text
as it arrives (`message.delta`), or ask for each response whole; runs stored before streamed

Revision ID: 0027_stream
Revises: 0026_reviewer
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0027_stream"
down_revision: str | None = "0026_reviewer"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("stream", sa.Boolean, nullable=False, server_default=sa.true()))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("stream")
