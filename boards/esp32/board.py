"""Generic ESP32 (ESP32-WROOM-32): the alternative shoe controller. Pins, peripherals as data."""

NAME = "esp32"
ARCH = "xtensawin"  # mpy-cross -march
FLASH_BYTES = 4 * 1024 * 1024
RAM_BYTES = 320 * 1024
FLASH_DIR = "/data"  # on littlefs (the "vfs" partition): identity, variant, boot counter
# The shoe log's raw partition: a data partition of the image's partition table
# (partitions-sabot-4MiB.csv), esp32.Partition.find(TYPE_DATA, label=LOG_PARTITION); its erases
# happen after a card, never in a card's path (docs/FLASH.md).
LOG_PARTITION = "sabotlog"

DECKS = 8  # the most decks this shoe holds; each shoe deals its provisioned count
MIN_CONFIDENCE = 0x80

# Card recognition module on UART2, 115200 8N1
SENSOR_UART = 2
SENSOR_BAUD = 115200
SENSOR_TX = 17
SENSOR_RX = 16

EXIT_SENSOR = 34  # input-only pin with an external pull-up on the photo-interrupter
BUTTONS = {"confirm": 25, "empty": 26, "void_card": 27, "keep_dummy": 32, "reveal": 13,
           "void_round": 33}
# No bet spots or blackjack buttons: the pins are taken (a blackjack shoe is a Pico's)
BET_SPOTS = ()
LAMPS = {"player": 18, "banker": 19, "result": 21, "alarm": 22}
BUZZER = 23
# Host link: UART0 through the board's USB-serial bridge, detached from the REPL (os.dupterm).
LINK = "uart"
LINK_UART = 0
LINK_BAUD = 115200
# Secure element (ATECC608-class, docs/ELEMENT.md) on I2C0, 400 kHz: SDA / SCL = GPIO4 / GPIO5
# (the usual GPIO21 / GPIO22 drive the result and alarm lamps)
ELEMENT_I2C = 0
ELEMENT_SDA = 4
ELEMENT_SCL = 5
ELEMENT_FREQ = 400_000
