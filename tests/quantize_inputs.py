"""Calibration and test inputs "like the data" for the MLPerf Tiny float models.

shared/models holds no data for the MLPerf models, so these synthesise inputs through the
same front ends the models were trained on, from synthetic signals with natural
statistics, fixed-seeded:

- KWS (DS-CNN): MFCCs of 1 s of 16 kHz audio as MLPerf Tiny's KWS front end computes
  them (30 ms Hann frames every 20 ms, 512-point |FFT|, 40 mel bins 20-4000 Hz,
  log(mel + 1e-6), DCT-II scaled by 1/sqrt(2·40), first 10 coefficients) of synthetic
  "utterances": voiced harmonic bursts with formant-like resonances and noise bursts
  over quiet background noise. Silence gives -123.5 on coefficient 0, the lower end of
  the int8 reference model's input range [-123.4, 25.7].
- VWW (MobileNetV1, input [0, 1]) and ResNet-8 (CIFAR-10, input [0, 255], the int8
  reference model's input scale is 1.0): images with a natural 1/f amplitude spectrum,
  correlated colour channels and a few hard-edged occluders, random brightness/contrast.
- AD (FC autoencoder, DCASE ToyCar): 5 consecutive frames of a 128-bin log-mel power
  spectrogram (10·log10, n_fft 1024, hop 512) of synthetic machine sound: harmonics of
  a rotating part plus coloured broadband noise. The int8 reference input range is
  [-84.9, 14.9] dB.

`inputs(name, n, seed)` returns an (n, *input_shape) float32 array for a model file stem.
"""

from __future__ import annotations

import numpy as np

SAMPLE_RATE = 16000


def _mel(f):
    return 1127.0 * np.log1p(np.asarray(f, dtype=np.float64) / 700.0)


def mel_matrix(n_mels: int, n_fft: int, sr: int, lo: float, hi: float) -> np.ndarray:
    """(n_fft // 2 + 1, n_mels) triangular mel filters on the HTK mel scale (as tf.signal)."""
    freqs = np.linspace(0, sr / 2, n_fft // 2 + 1)
    edges = np.linspace(_mel(lo), _mel(hi), n_mels + 2)
    m = _mel(freqs)[:, None]
    lower, center, upper = edges[:-2], edges[1:-1], edges[2:]
    w = np.maximum(0, np.minimum((m - lower) / (center - lower), (upper - m) / (upper - center)))
    w[0] = 0.0                                    # tf.signal drops the DC bin
    return w


def _frames(audio: np.ndarray, length: int, step: int) -> np.ndarray:
    n = 1 + (audio.shape[-1] - length) // step
    idx = np.arange(length)[None, :] + step * np.arange(n)[:, None]
    return audio[..., idx]


def _hann(n: int) -> np.ndarray:
    return 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n) / n)   # periodic, as tf.signal


def kws_mfcc(audio: np.ndarray) -> np.ndarray:
    """(n, 16000) audio in [-1, 1] → (n, 49, 10) MFCCs, MLPerf Tiny KWS front end."""
    frames = _frames(audio, 480, 320) * _hann(480)
    spec = np.abs(np.fft.rfft(frames, n=512))
    mel = spec @ mel_matrix(40, 512, SAMPLE_RATE, 20.0, 4000.0)
    log_mel = np.log(mel + 1e-6)
    k = np.arange(40)
    dct = 2.0 * np.cos(np.pi * (2 * k[:, None] + 1) * np.arange(40)[None, :] / 80.0)
    return (log_mel @ dct / np.sqrt(80.0))[..., :10].astype(np.float32)


def _utterance(rng: np.random.Generator) -> np.ndarray:
    t = np.arange(SAMPLE_RATE) / SAMPLE_RATE
    # Speech Commands clips shorter than 1 s are zero-padded: digital silence at the end.
    content = int(SAMPLE_RATE * rng.uniform(0.6, 1.0))
    audio = rng.normal(0, 10 ** rng.uniform(-5, -3), SAMPLE_RATE)    # background
    audio[content:] = 0.0
    if rng.random() < 0.1:
        return audio                                                  # "silence"
    start = rng.uniform(0.05, 0.4)
    for _ in range(rng.integers(1, 4)):                               # syllables
        dur = rng.uniform(0.08, 0.3)
        # Synthesise only where the Gaussian envelope (sigma dur/4) is not negligible.
        a = max(int((start + dur / 2 - dur * 0.75) * SAMPLE_RATE), 0)
        b = min(int((start + dur / 2 + dur * 0.75) * SAMPLE_RATE), content)
        if b - a < 16:
            break
        ts = t[a:b]
        env = np.exp(-0.5 * ((ts - start - dur / 2) / (dur / 4)) ** 2)
        f0 = rng.uniform(90, 260) * (1 + 0.1 * np.sin(2 * np.pi * rng.uniform(2, 6) * ts))
        phase = 2 * np.pi * np.cumsum(f0) / SAMPLE_RATE
        formants = rng.uniform([300, 900, 2200], [900, 2400, 3500])
        h = np.arange(1, min(30, int(7000 // f0.mean())) + 1)
        gain = np.exp(-0.5 * ((h[:, None] * f0.mean() - formants[None, :]) / 120.0) ** 2).sum(1) + 0.05
        voiced = (gain / np.sqrt(h)) @ np.sin(h[:, None] * phase[None, :])
        audio[a:b] += 10 ** rng.uniform(-1.5, 0.0) * env * voiced / 4
        if rng.random() < 0.5:                                        # fricative
            noise = np.diff(rng.normal(0, 1, SAMPLE_RATE + 1))
            fenv = np.exp(-0.5 * ((t - start - dur) / 0.03) ** 2)
            audio[:content] += (10 ** rng.uniform(-2.0, -0.5) * fenv * noise)[:content]
        start += dur + rng.uniform(0.0, 0.15)
    return np.clip(audio, -1, 1)


def kws(n: int, rng: np.random.Generator) -> np.ndarray:
    audio = np.stack([_utterance(rng) for _ in range(n)])
    return kws_mfcc(audio)[..., None]                                 # (n, 49, 10, 1)


def images(n: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """(n, size, size, 3) in [0, 1]: 1/f noise, correlated colour, hard-edged occluders."""
    fy = np.fft.fftfreq(size)[:, None]
    fx = np.fft.rfftfreq(size)[None, :]
    f = np.sqrt(fx ** 2 + fy ** 2)
    f[0, 0] = 1.0 / size
    out = np.empty((n, size, size, 3), np.float32)
    yy, xx = np.mgrid[0:size, 0:size] / size
    for i in range(n):
        amp = f ** -rng.uniform(0.9, 1.3)
        chans = []
        for _ in range(3):
            phase = np.exp(2j * np.pi * rng.random(amp.shape))
            chans.append(np.fft.irfft2(amp * phase, s=(size, size)))
        base = np.stack(chans, -1)
        mix = np.eye(3) * rng.uniform(0.1, 0.4) + rng.uniform(0.6, 1.0)   # luminance-heavy
        img = base @ mix
        img = (img - img.mean()) / (img.std() + 1e-9)
        for _ in range(rng.integers(0, 4)):                              # occluders
            cx, cy, r = rng.random(), rng.random(), rng.uniform(0.1, 0.4)
            mask = ((xx - cx) ** 2 + (yy - cy) ** 2 < r ** 2) if rng.random() < 0.5 else \
                (np.abs(xx - cx) < r) & (np.abs(yy - cy) < r * rng.uniform(0.3, 1.0))
            img[mask] = img[mask] * 0.3 + rng.normal(0, 1, 3)
        img = 0.5 + img * rng.uniform(0.12, 0.25) + rng.uniform(-0.15, 0.15)
        out[i] = np.clip(img, 0.0, 1.0)
    return out


def machine_log_mel(n: int, rng: np.random.Generator) -> np.ndarray:
    """(n, 640): 5 frames × 128 log-mel bins (dB) of synthetic machine sound."""
    n_fft, hop, seconds = 1024, 512, 0.25
    length = int(SAMPLE_RATE * seconds)
    t = np.arange(length) / SAMPLE_RATE
    mel = mel_matrix(128, n_fft, SAMPLE_RATE, 0.0, SAMPLE_RATE / 2)
    mel /= np.maximum(mel.sum(axis=0, keepdims=True), 1e-9) / 2      # area-normalised
    out = np.empty((n, 640), np.float32)
    for i in range(n):
        f0 = rng.uniform(20, 200)
        audio = np.zeros(length)
        for h in range(1, 40):
            if h * f0 > 7500:
                break
            audio += rng.uniform(0, 1) / h * np.sin(2 * np.pi * h * f0 * t + rng.uniform(0, 6.3))
        white = rng.normal(0, 1, length)
        tilt = np.fft.irfft(np.fft.rfft(white) / np.maximum(np.arange(length // 2 + 1), 1)
                            ** rng.uniform(0.0, 0.8), n=length)
        audio = audio * 10 ** rng.uniform(-3.5, -1.8) + tilt / tilt.std() * 10 ** rng.uniform(-4, -2.3)
        frames = _frames(audio, n_fft, hop)[:5] * _hann(n_fft)
        power = np.abs(np.fft.rfft(frames)) ** 2
        out[i] = (10.0 * np.log10(power @ mel + np.finfo(np.float64).eps)).reshape(-1)
    return out


def inputs(name: str, n: int, seed: int = 0) -> np.ndarray:
    """n inputs like the data of the MLPerf float model with file stem `name`."""
    rng = np.random.default_rng(seed)
    if name.startswith("kws"):
        return kws(n, rng)
    if name.startswith("vww"):
        return images(n, 96, rng)
    if name.startswith("pretrainedResnet"):
        return (images(n, 32, rng) * 255.0).astype(np.float32)
    if name.startswith("ad01"):
        return machine_log_mel(n, rng)
    raise KeyError(f"no input generator for {name}")
