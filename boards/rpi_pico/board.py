"""Raspberry Pi Pico (RP2040): the reference shoe controller. Pins and peripherals as data."""

NAME = "rpi_pico"
ARCH = "armv6m"  # mpy-cross -march
FLASH_BYTES = 2 * 1024 * 1024
RAM_BYTES = 264 * 1024
FLASH_DIR = "/data"  # on littlefs: the shoe's identity, variant and boot counter
# The port's flash storage (MicroPython's RPI_PICO: the last 1408 KB of the chip) is littlefs over
# its first part (the image's _boot.py, mounted at /) and then the shoe log's raw partition,
# rp2.Flash(start=LOG_START, len=LOG_BYTES): its erases happen after a card, never in a card's
# path (docs/FLASH.md). _boot.py holds the same split (tests/test_manifests.py checks it).
STORAGE_BYTES = 1408 * 1024
LOG_START = 1152 * 1024
LOG_BYTES = 256 * 1024

DECKS = 8  # the most decks this shoe holds; each shoe deals its provisioned count
MIN_CONFIDENCE = 0x80

# Card recognition module on UART0, 115200 8N1
SENSOR_UART = 0
SENSOR_BAUD = 115200
SENSOR_TX = 0  # GP0
SENSOR_RX = 1  # GP1

EXIT_SENSOR = 2  # GP2, photo-interrupter, open collector, falling edge per card
BUTTONS = {"confirm": 3, "empty": 4, "void_card": 5, "keep_dummy": 6, "reveal": 8, "void_round": 7,
           "next": 9, "double": 15, "split": 18}  # next/double/split: a blackjack table's
# Blackjack: the bet spots' sensors, seat 1 (the dealer's left) first; a wager pulls its pin low
BET_SPOTS = (19, 20, 21, 22, 26, 27, 28)
LAMPS = {"player": 10, "banker": 11, "result": 12, "alarm": 13}
BUZZER = 14  # PWM
# Host link: a USB CDC interface of the shoe's own (usb-device-cdc); the USB REPL interface is off.
LINK = "usb_cdc"
# Secure element (ATECC608-class, docs/ELEMENT.md) on I2C0, 400 kHz: SDA / SCL = GP16 / GP17
# (I2C0's GP4 / GP5 carry the empty and void-card buttons)
ELEMENT_I2C = 0
ELEMENT_SDA = 16
ELEMENT_SCL = 17
ELEMENT_FREQ = 400_000
