"""`kill -9` of a real training process at every fixed point of a save, of the pruning and of the export, and at a
random moment: after each kill `latest` is usable and a previous export whole, and the resumed run ends with the
losses and weights of the run that was never interrupted (bit for bit). See tests/kill_campaign.py."""

import pytest
from kill_campaign import FIXED_POINTS, campaign


@pytest.mark.slow
def test_kill_at_any_point_then_resume_gives_the_uninterrupted_run(tmp_path):
    results = campaign(tmp_path, random_count=1, seed=1)
    assert set(FIXED_POINTS) <= set(results)
    assert all(outcome.endswith("identical") for outcome in results.values()), results
