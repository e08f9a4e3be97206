"""The bundled example: an 8x8 digit classifier trained here, with numpy only.

Digits come from a 5x7 bitmap font, placed at a random offset in an 8x8 frame with random
stroke intensity and background noise. A two-layer perceptron (64 → 32 relu → 10 softmax)
trained on them with full-batch Adam recognises held-out samples almost always. Everything
is seeded, so the weights — and the archive made from them — are reproducible.
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple

import numpy as np

from .model import GeneratedModel
from .network import Network

IMAGE_SIZE = 8
INPUT_NAME = "image"
INPUT_SHAPE = (1, 1, IMAGE_SIZE, IMAGE_SIZE)
HIDDEN = 32
CLASSES = 10

_FONT = {
    0: (".###.", "#...#", "#..##", "#.#.#", "##..#", "#...#", ".###."),
    1: ("..#..", ".##..", "..#..", "..#..", "..#..", "..#..", ".###."),
    2: (".###.", "#...#", "....#", "...#.", "..#..", ".#...", "#####"),
    3: ("#####", "...#.", "..#..", "...#.", "....#", "#...#", ".###."),
    4: ("...#.", "..##.", ".#.#.", "#..#.", "#####", "...#.", "...#."),
    5: ("#####", "#....", "####.", "....#", "....#", "#...#", ".###."),
    6: ("..##.", ".#...", "#....", "####.", "#...#", "#...#", ".###."),
    7: ("#####", "....#", "...#.", "..#..", ".#...", ".#...", ".#..."),
    8: (".###.", "#...#", "#...#", ".###.", "#...#", "#...#", ".###."),
    9: (".###.", "#...#", "#...#", ".####", "....#", "...#.", ".##.."),
}
GLYPHS = {
    digit: np.array([[ch == "#" for ch in row] for row in rows], dtype=np.float64)
    for digit, rows in _FONT.items()
}


def render_digit(digit: int, rng: np.random.Generator, noise: float = 0.15) -> np.ndarray:
    """One noisy 8x8 image of ``digit`` (float32 in [0, 1])."""
    glyph = GLYPHS[digit]
    dy = int(rng.integers(0, IMAGE_SIZE - glyph.shape[0] + 1))
    dx = int(rng.integers(0, IMAGE_SIZE - glyph.shape[1] + 1))
    image = np.zeros((IMAGE_SIZE, IMAGE_SIZE))
    strokes = glyph * rng.uniform(0.6, 1.0, glyph.shape)
    image[dy : dy + glyph.shape[0], dx : dx + glyph.shape[1]] = strokes
    image += rng.normal(0.0, noise, image.shape)
    return np.clip(image, 0.0, 1.0).astype(np.float32)


def make_dataset(count: int, seed: int) -> Tuple[np.ndarray, np.ndarray]:
    """``count`` images (flattened, [count, 64]) and their labels, balanced over digits."""
    rng = np.random.default_rng(seed)
    labels = np.arange(count) % CLASSES
    rng.shuffle(labels)
    images = np.stack([render_digit(int(d), rng).reshape(-1) for d in labels])
    return images, labels.astype(np.int32)


def _matmul(spec: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # einsum, not BLAS: single-threaded and in a fixed order, so training gives the same
    # bits whatever the machine's core count (multi-threaded BLAS may sum differently).
    return np.einsum(spec, a, b)


def _forward(params: Dict[str, np.ndarray], x: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    hidden = np.maximum(_matmul("nk,hk->nh", x, params["w1"]) + params["b1"], 0.0)
    logits = _matmul("nh,ch->nc", hidden, params["w2"]) + params["b2"]
    logits -= logits.max(axis=1, keepdims=True)
    probs = np.exp(logits)
    return hidden, probs / probs.sum(axis=1, keepdims=True)


def _gradients(
    params: Dict[str, np.ndarray], x: np.ndarray, labels: np.ndarray
) -> Dict[str, np.ndarray]:
    hidden, probs = _forward(params, x)
    delta = probs.copy()
    delta[np.arange(len(labels)), labels] -= 1.0
    delta /= len(labels)
    back = _matmul("nc,ch->nh", delta, params["w2"]) * (hidden > 0)
    return {
        "w2": _matmul("nc,nh->ch", delta, hidden),
        "b2": delta.sum(axis=0),
        "w1": _matmul("nh,nk->hk", back, x),
        "b1": back.sum(axis=0),
    }


def train_digits(
    seed: int = 0, samples: int = 2000, steps: int = 200, rate: float = 0.02
) -> Dict[str, np.ndarray]:
    """Weights ``w1 [32, 64], b1 [32], w2 [10, 32], b2 [10]`` (float32), trained with Adam."""
    x, labels = make_dataset(samples, seed)
    x = x.astype(np.float64)
    rng = np.random.default_rng(seed + 1)
    params = {
        "w1": rng.normal(0.0, 1.0 / np.sqrt(64), (HIDDEN, 64)),
        "b1": np.zeros(HIDDEN),
        "w2": rng.normal(0.0, 1.0 / np.sqrt(HIDDEN), (CLASSES, HIDDEN)),
        "b2": np.zeros(CLASSES),
    }
    first = {k: np.zeros_like(v) for k, v in params.items()}
    second = {k: np.zeros_like(v) for k, v in params.items()}
    for step in range(1, steps + 1):
        for key, grad in _gradients(params, x, labels).items():
            first[key] = 0.9 * first[key] + 0.1 * grad
            second[key] = 0.999 * second[key] + 0.001 * grad * grad
            corrected = first[key] / (1 - 0.9**step)
            scale = np.sqrt(second[key] / (1 - 0.999**step)) + 1e-8
            params[key] = params[key] - rate * corrected / scale
    return {k: v.astype(np.float32) for k, v in params.items()}


def accuracy(weights: Dict[str, np.ndarray], count: int = 1000, seed: int = 12345) -> float:
    """Share of freshly rendered (held-out) digits classified correctly."""
    x, labels = make_dataset(count, seed)
    _, probs = _forward({k: v.astype(np.float64) for k, v in weights.items()}, x)
    return float(np.mean(probs.argmax(axis=1) == labels))


def digits_network(weights: Dict[str, np.ndarray], name: str = "digits") -> Network:
    net = Network(name)
    image = net.input(INPUT_NAME, INPUT_SHAPE, "float32")
    flat = net.reshape(image, (1, IMAGE_SIZE * IMAGE_SIZE))
    hidden = net.dense(flat, weights["w1"], weights["b1"], relu=True)
    net.output(net.softmax(net.dense(hidden, weights["w2"], weights["b2"])))
    return net


def digit_sample(seed: int, digit: Optional[int] = None) -> Dict[str, np.ndarray]:
    """Inputs for the digits model: one rendered digit (random unless given)."""
    rng = np.random.default_rng(seed)
    chosen = int(rng.integers(0, CLASSES)) if digit is None else digit
    return {INPUT_NAME: render_digit(chosen, rng).reshape(INPUT_SHAPE)}


def digits_model(seed: int = 0) -> GeneratedModel:
    """The trained example classifier as a GeneratedModel (trains in about a second)."""
    net = digits_network(train_digits(seed))
    return net.build(
        sample_fn=digit_sample,
        description="8x8 digit classifier (64-32-10 MLP, softmax); input 'image' in [0, 1]",
    )


def ascii_image(image: np.ndarray) -> str:
    """A terminal rendering of an 8x8 image, darker characters for brighter pixels."""
    shades = " .:-=+*#%@"
    rows = np.asarray(image, dtype=np.float64).reshape(IMAGE_SIZE, IMAGE_SIZE)
    levels = np.clip((rows * (len(shades) - 1)).round().astype(int), 0, len(shades) - 1)
    return "\n".join("".join(shades[v] * 2 for v in row) for row in levels)
