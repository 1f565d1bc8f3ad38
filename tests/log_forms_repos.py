"""Training scripts in the log forms public repos print (issue 29 item 4), written here after
the lines real repos print: pytorch/examples word_language_model's `| end of epoch |` line
(str.format, `|`-separated, a validation loss beside its perplexity), a step log whose only
held-out split is named "test", a `saving model with new top score of` sentence, a
%-formatted per-phase line, and logging calls. Each runs in well under a second, varies with
AUTORESEARCH_SEED and keeps an UPPER_CASE setting to search."""

# pytorch/examples word_language_model/main.py, its log lines as printed there
WORD_LM = '''\
import math
import os
import random
import time

LR = 20.0
EPOCHS = 3
LOG_INTERVAL = 2
random.seed(1111 + int(os.environ.get("AUTORESEARCH_SEED", "0")))


def evaluate(epoch):
    return 5.0 + abs(math.log(LR / 10)) + 1.0 / epoch + random.random() * 0.01


def train(epoch):
    for batch in range(1, 5):
        cur_loss = 6.0 + 1.0 / (epoch * batch)
        if batch % LOG_INTERVAL == 0:
            print('| epoch {:3d} | {:5d}/{:5d} batches | lr {:02.2f} | ms/batch {:5.2f} | '
                  'loss {:5.2f} | ppl {:8.2f}'.format(epoch, batch, 4, LR, 12.3, cur_loss,
                                                      math.exp(cur_loss)))


for epoch in range(1, EPOCHS + 1):
    epoch_start_time = time.time()
    train(epoch)
    val_loss = evaluate(epoch)
    print('-' * 89)
    print('| end of epoch {:3d} | time: {:5.2f}s | valid loss {:5.2f} | '
          'valid ppl {:8.2f}'.format(epoch, (time.time() - epoch_start_time),
                                     val_loss, math.exp(val_loss)))
    print('-' * 89)
test_loss = evaluate(EPOCHS) + 0.1
print('=' * 89)
print('| End of training | test loss {:5.2f} | test ppl {:8.2f}'.format(
    test_loss, math.exp(test_loss)))
print('=' * 89)
'''

# a step log: the minibatch loss every 10 steps, train and test loss every 20; "test" is the
# only held-out split
STEP_TEST = '''\
import math
import os
import random

LR = 3e-3
rng = random.Random(int(os.environ.get("AUTORESEARCH_SEED", "0")))
for step in range(61):
    loss = 2.0 + abs(math.log(LR / 1e-3)) + 5.0 / (step + 1) + rng.random() * 0.1
    if step % 10 == 0:
        print(f"step {step} loss {loss:.4f}")
    if step % 20 == 0:
        train_loss = loss - 0.05
        test_loss = loss + 0.2 + rng.random() * 0.01
        print(f"step {step} train loss: {train_loss:.4f} test loss: {test_loss:.4f}")
'''

# a sentence with a number in it: `score` is train + test counts, not a metric
TOP_SCORE = '''\
import os
import random

LR = 0.05
rng = random.Random(int(os.environ.get("AUTORESEARCH_SEED", "0")))
best = -1
for epoch in range(3):
    train_correct = 50 + epoch * 10 + int(100 * LR)
    test_correct = 40 + epoch * 5 + rng.randint(0, 3)
    train_loss = 1.0 / (epoch + 1) + LR
    test_acc = test_correct / 100
    print(f"epoch {epoch}: train loss {train_loss:.4f} | test acc {test_acc:.4f}")
    score = train_correct + test_correct
    if score > best:
        best = score
        print(f"saving model with new top score of {score}")
'''

# %-formatting, the split a loop variable (the PyTorch transfer-learning tutorial's shape)
PERCENT = '''\
import os
import random

LR = 0.01
MOMENTUM = 0.9
rng = random.Random(int(os.environ.get("AUTORESEARCH_SEED", "0")))
for epoch in range(3):
    print('Epoch %d/%d' % (epoch, 2))
    for phase in ['train', 'val']:
        epoch_loss = 1.0 / (epoch + 1) + abs(LR - 0.02) * 10 + (0.1 if phase == 'val' else 0)
        epoch_loss += rng.random() * 0.01
        epoch_acc = 1 - epoch_loss / 2
        print('%s loss %.4f acc %.4f' % (phase, epoch_loss, epoch_acc))
'''

# logging calls, their own %-arguments, `name=value`, a timestamp before each message
LOGGING = '''\
import logging
import os
import random

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
logger = logging.getLogger(__name__)
WEIGHT_DECAY = 0.01
rng = random.Random(int(os.environ.get("AUTORESEARCH_SEED", "0")))
for epoch in range(1, 4):
    train_loss = 0.5 / epoch + WEIGHT_DECAY
    f1 = 0.7 + 0.05 * epoch - abs(WEIGHT_DECAY - 0.02) + rng.random() * 0.001
    logger.info("epoch %d | train_loss=%.4f | eval_f1=%.4f", epoch, train_loss, f1)
    logging.info("saved checkpoint to %s", f"ckpt-{epoch}.pt")
'''
