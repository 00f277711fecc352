"""Tutorial 03's kernel with one width per training key (quick run): more freedom lowers the leave-one-out loss, the
widths spread and turn the noisiest keys down; the measured answers to the exercises hold their stated shape."""

import numpy as np
import pytest
from test_tutorials import run_tutorial

# One worker runs this module's tests, so its module-scoped run happens once (pyproject: --dist loadgroup).
pytestmark = pytest.mark.xdist_group("tutorial03")


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    return run_tutorial("03_nadaraya_watson.py", tmp_path_factory.mktemp("tutorial03"))


def test_03_one_width_per_training_key(quick_run):
    numbers, figures, _ = quick_run
    # The single width is one point of the 50-width family and both start from sigma = 1: 50 widths fit the
    # leave-one-out loss better (quick run: 0.348 against 0.360).
    assert numbers["per_key_loo_loss"] < 0.99 * numbers["train_loss_first_last"][1]
    low, middle, high = numbers["per_key_sigma_min_median_max"]
    assert 0 < low < middle < high and high / low > 2  # the widths spread (quick run: 0.19 to 0.92)
    quiet, noisy = numbers["per_key_sigma_quietest_noisiest_10"]
    assert noisy < 0.8 * quiet  # the noisiest keys are narrowed (quick run: 0.34 against 0.53)
    data = np.load(figures / "03_per_key.npz")
    assert data["sigma_per_key"].shape == (50,) and (data["sigma_per_key"] > 0).all()
    np.testing.assert_allclose(data["y_learned"], np.load(figures / "03_fits.npz")["y_learned"])
    # Every fit beats the average, and the test errors of the other draws are all measured.
    assert numbers["per_key_mse"] < numbers["mse_average"]
    draws = np.array(numbers["per_key_other_draws_mse"])
    assert draws.shape == (4, 2) and (draws > 0).all() and (draws < numbers["mse_average"]).all()


def test_03_measured_answers_have_the_shape_the_text_gives(quick_run):
    numbers, _, _ = quick_run
    answers = numbers["answers"]
    # Exercise 1: less noise, a narrower width; more noise, a wider one.
    assert answers["noise"]["0.1"][0] < numbers["sigma_learned"] < answers["noise"]["1.0"][0]
    # Exercise 2: more points, a narrower width and a lower test error.
    assert answers["n_200"][0] < numbers["sigma_learned"] and answers["n_200"][1] < numbers["mse_learned"]
    # Exercise 3: a U shape over the fixed widths, its bottom at 0.25.
    fixed = answers["fixed_sigma_mse"]
    assert min(fixed, key=fixed.get) == "0.25" and fixed["0.05"] > fixed["0.25"] < fixed["1.0"]
    # Exercise 4: without the mask the library's width runs away (log sigma² falls, w grows past the by-hand fit's).
    assert answers["library_naive"]["log_width"] < -2 and answers["library_naive"]["w"] > numbers["w_naive"]
    # Exercise 5: the two nearest keys in order, and a threshold well below their distances.
    lookup = answers["lookup"]
    assert lookup["distances"][0] < lookup["distances"][1] and 0.005 < lookup["sigma"] < 0.05
    # Exercise 6: the reach of a salience grows with b, but more slowly (about as sqrt(b)).
    reach = answers["salience_reach"]
    assert reach["3.0"] < reach["8.0"] < reach["3.0"] * 8 / 3
    # Exercise 7: without the mask the free scores fit the training set but do not put their weight on the diagonal.
    free = answers["free_unmasked"]
    assert free["loss"] < 0.01 and free["own_weight"] < 0.5 and free["test_mse"] > numbers["mse_learned"]
