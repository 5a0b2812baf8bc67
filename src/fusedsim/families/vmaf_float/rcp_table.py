"""The approximate reciprocal (SSE ``rcpss``) as the reference machine computes it, for ``float_adm``.

libvmaf's ``adm_tools.c`` divides as ``n * rcp_s(d)`` with ``rcp_s(x) = r + r * (1 - x * r)``, ``r = rcpss(x)``,
whenever it is compiled for SSE2 (every x86-64 build). ``rcpss`` is approximate and its bits are the CPU vendor's:
libvmaf 3.2.0's float ADM values in ``refdata/vmaf-score`` match the AMD EPYC result bit for bit (an exact
division misses 14 of them), which this table holds. Measured with ``_mm_rcp_ss`` on an AMD EPYC over every
float32 with exponent 0 (the result depends only on
the top 12 mantissa bits of the input, and for biased exponents 1..252 the exponent is ``253 - e``):
``RCP_MANTISSA[m >> 11]`` is the top 12 bits of the result's 23-bit mantissa (its low 11 bits are 0).
"""

from __future__ import annotations

import base64
import zlib

import numpy as np

__all__ = ["RCP_MANTISSA"]

_PACKED = (
    "eNod2IPjV2cbBvDvOY91TrZtr1pu2bZt27Zby1habtmuZWPZ1qq1rPd6f/fnX3huXM/38Gv4JfwUfgjfhW/DN+Gr8GX4InwWPgkfhQ/Ce+Gt8EZ4Pbwa"
    "Xg4vhRfCc+GZ8FR4MjweHg0Ph4fCA+HecHe4K9wRbgu3hJvCDeG6cG24JlwVrgiXhUvDxeGCcF44N5wdzgynh9PCqeHkcGI4IRwXjglHhSPCYeGQcFA4"
    "MOwf9g17hz3D7mHXsHPYKewQtgvbhK3CFmHTsHHYKGwQ1gvrhLXCGmG1sEpYOawYlg/LhqXDkmGxsGhYJCwUFgjzhXnD3GGuMEeYPcwaZg4zhunDtGHq"
    "MGWYIkwWJgkThQnCeGGcMFYYM4wehqELTahCEbKQhn4YCb8HX4PPwcfgffAueBu8CV4FL4PnwdPgcfAoeBDcC+4Et4IbwbXgSnA5uBRcCM4FZ4JTwYng"
    "WHA0OBwcCg4E+4I9wa5gR7A92BpsDjYG64M/g7XB6mBVsCJYFiwNFgcLgwXBvGBuMDuYGUwPpgVTgynBpGBiMD4YG4wORgbDg6HB4GBQMCDoF/QJegU9"
    "gu5B16BL0CnoELQL2gStghZBs6Bp0DhoGNQP6ga1g1pBjaB6UDWoHFQMygdlg9JByaBEUCwoGhQOCgb5g3xB3iBP8FOQM8geZA0yBxmD9EG6IE2QKkgR"
    "JAuSBImChEH8IG4QJ4gVxAiiB2HgAhvoQAYiYAEJIsEP9819cZ/dR/fevXNv3Rv32v3jXrjn7ql77B64++6uu+1uuRvumrvqLrtL7qI77866M+6UO+GO"
    "uaPusDvkDrr9bq/b43a5HW672+o2u01ug1vn1rjVbqVb7pa5pW6xW+R+d/PdPDfHzXIz3XQ3zU11U9wkN8GNd2PdaDfKjXDD3FA32A10A1w/18f1cj1d"
    "d9fVdXGdXAfX3rV1rV0r18I1c01dY9fQ1Xf1XB1Xy9V01V1VV8VVchVceVfWlXalXAlXzBV1RVwhV8Dldz+7PC63y+VyuOwuq8vsMrkMLp1L41K7lC65"
    "S+aSuEQuoYvv4ro4LpaL4aK70DlnnXHKCccddb7z3A/7zX61n+1H+8G+s2/tv/aNfWVf2hf2mX1iH9uH9r69Z+/YW/amvW6v2iv2sr1kL9jz9qw9bU/Z"
    "E/aYPWoP20P2oN1v99o9drfdabfbbXaL3WQ32vX2T7vWrrYr7Qq7zC61S+xiu9AusPPtXDvbzrIz7G92mp1qJ9tJdoIdB2PtaDvSjrDD7BA72A60/W0/"
    "28f2sj1td9vVdradbAfb3razbWxr29K2sM1sU9vYNrINbH1b19ayNW11W81WtZVtJVvBlrdlbRlbypa0xW0xW9QWsgVtfpvP/mzz2Nw2l81ps9tsNovN"
    "bDPaDDadTW1T2RQ2uU1mk9jENqFNYOPZuDa2jWVj2Og2tM5aq62y0nLLLLG+jdgf5pv5aj6bT+aD+c+8NW/Ma/PKvDQvzDPz1Dw2j8wDc9/cNXfMLXPD"
    "XDdXzRVz2VwyF815c86cMafNSXPCHDNHzWFzyBw0+80+s9fsNrvMDrPdbDVbzCaz0aw368xas9qsMivMcrPMLDVLzCKz0Cww881cM8fMMjPNdDPN/Gqm"
    "mMlmkplgxpuxZowZZUaa4WaYGWIGm4FmgOlv+po+prfpaXqYbqar6Ww6mQ6mvWlr2phWpoVpbpqaJqaxaWgamHqmrqltapkaprqpaqqYSqaiqWDKmbKm"
    "jCllSprippgpaoqYQqagyW/ymbwmj8ltcpmcJofJZrKazCaTyWDSm7QmjUllUprkJplJahKbRCahiW/imTgmtolpYphoJjTOWKONMtJwwww1vvHMD/1d"
    "f9Vf9Cf9Ub/X7/Rb/Ua/1q/0S/1CP9dP9RP9WD/UD/R9fVff0bf1TX1dX9NX9WX9t76kL+jz+pw+o0/rU/qEPq6P6SP6kD6oD+h9eq/eo3fpnXqH3qa3"
    "6i16k96oN+h1eq1eo1frlXqFXq7/0Ev1Er1IL9S/6/l6np6rZ+uZeoaerqfpX/VUPVlP0hP1eD1Oj9Wj9Sg9Ug/XQ/UQPVgP1AN0f91X99G9dU/dQ3fX"
    "XXUX3Vl31O11O91Wt9atdEvdXDfTTXVj3Ug31PV1PV1X19Y1dQ1dXVfVVXRlXVFX0OV1WV1Gl9YldQldXP+ii+oiurAuqAvo/PpnnVfn0T/pXDqnzq6z"
    "6aw6s86oM+j0Oq1Oo1PrlDqFTq6T6iQ6sU6oE+j4Oq6Oo2PrWDqGjq6j6UA7bbXWSkvNNdNU+9rTEf1DfVNf1Rf1SX1UH9Q79Z96q96o1+qVeqleqOfq"
    "mXqiHqtH6oG6r+6pO+q2uqVuqOvqmrqiLqu/1SV1QZ1X59QZdVqdUifUcXVMHVGH1V/qoDqg9qt9ao/arXapHWq72qa2qM1qk9qg1qt1ai2sUavVSrVC"
    "LVd/qKVqiVqkFqrf1Xw1T81Vs9VMNUNNV7+paWqqmqImq0lqghqvxqmxaowapUaq4WqYGqqGqMFqoBqg+qt+qo/qrXqpnqqH6qa6qs6qk+qoOqj2qq1q"
    "o1qrVqqFaq6aqaaqiWqkGqr6qp6qq+qo2qqmqqGqq2qqiqqsKqmKqoIqp8qq0qqUKqlKqOLqF1VUFVGFVUFVQOVX+dTPKo/KrXKpnCqHyq6yqSwqs8qk"
    "Mqr0Kp1Kq9Ko1CqlSqGSqaQqiUqsEqkEKr6Kp+Kq2CqWiqliqOgqVIFyyiqjtFJKKK6YospXnoqoH/K7/Cq/yE/yo/wg38t38q38V76Rr+U/8qV8IZ/L"
    "Z/KJfCwfyYfygbwv78k78ra8JW/K6/KavCqvyMvykrwoz8tz8qw8I0/Lk/KEPC6PySPysPxLHpIH5X65T+6Ve+RuuUvulNvlNrlVbpGb5Ea5Qa6X6+Ra"
    "uUaulqvkSrlCLpd/yKVyiVwsF8rf5QI5X86Tc+RsOUvOlDPkdPmb/FVOlVPkZDlRTpDj5Tg5Vo6Wo+RIOUIOl8PkUDlYDpID5QDZT/aVfWRv2Uv2kN2h"
    "m+wqu8jOsqPsINvLdrKNbC1byZayhWwmm8omsrFsJBvI+rKerCvryNqylqwpa8hqsqqsIivLSrKirCDLybKyjCwtS8mSsoQsLovJorKILCwLyQIyv8wn"
    "88o8Mrf8SeaSOWUOmV1mk1lkZplJZpQZZHqZTqaRqWUqmVKmkMllMplUJpGJZEKZQMaX8WRcGUfGkjFlDBldRpOhDKSTVmqppJRCcskklb70ZET+EN/F"
    "N/FVfBGfxUfxQbwX78R/4q34V7wWr8Q/4qV4IZ6LZ+KpeCIeiYfigbgv7om74o64JW6KG+K6uCauiivisvhbXBQXxHlxTpwVZ8RpcVKcEMfFMXFUHBGH"
    "xV/ikDgg9ot9Yi/sEbvFTrFDbBfbxFaxRWwWm8RGsV6sE3+KtWKNWC1WiRViuVgm/hBLxRKxWCwSC8UCMV/ME3NhjpgtZooZYrr4TUwTv4qpYoqYLCaK"
    "CWK8GCfGijFitBgpRojhYpgYKoaIwWKQGCj6i36ir+gDvUUv0UN0F91EV9FFdBadREfRQbQTbUUb0RpaiZaiuWgmmoomorFoJBqKBqK+qCvqiNqiFtQU"
    "NUQ1UVVUEZVFJVFRVBDlRTlRRpQWpURJUUIUF8XEL6KoKCIKi0KioCgg8ot84meRV+QRuUUukVPkENlFNpFVZBGZRSaRUWQQ6UU6kVakEalFKpFSpBDJ"
    "RTKRVCQRiUUikVAkEPFFPBFXxBGxRUwRQ0QX0UQoAuGEFUZooYQUQnDBBBW+8ERE/ODf+Tf+lX/hn/kn/pF/4O/5O/4ff8v/5W/4a/6K/8Nf8hf8OX/G"
    "n/In/DF/xB/yB/w+v8fv8jv8Nr/Fb/Ib/Dq/xq/yK/wy/5tf4hf5BX6On+Vn+Gl+ip/kJ/hxfowf5Uf4Yf4XP8QP8gN8P9/H9/I9fDffxXfyHXw738a3"
    "8i18M9/EN/INfD1fx//ka/kavpqv4iv5Cr6cL+N/8KV8CV/MF/GF/He+gM/n8/hcPofP5rP4TD6DT+e/8Wn8Vz6VT+GT+SQ+kU/g4/k4PpaP4aP5KD6S"
    "j+DD+TA+lA/hg/kgPpAP4P15P96X9+G9eS/ek/fg3Xk33hW68M68E+/IO/D2vB1vy9vw1rwVb8lb8Oa8GW/Km/DGvBFvyBvw+rwer8vr8Nq8Fq/Ja/Dq"
    "vBqvyqvwyrwSr8gr8PK8HC/Ly/DSvBQvyUvw4rwY/4UX5UV4YV6IF4QCPD/Px3/meXkenpv/xHPxnDwHz86z8aw8C2TmmXhGnoGn5+l4Wp6Gp+YpeQqe"
    "nCfjSXkSSMwT8YQ8AY/P4/G4PA6PzWPxmDwGj86j8RAC7rjlhmuuuOSCc8445YT73OMR+MG+s2/sK/vCPrNP7CP7wN6zd+w/9pb9y97Aa/aK/cNeshfs"
    "OXvGnrIn7DF7xB6yB+w+uwd32R12m91iN9kNdp1dY1fZFXaZ/c0usYvsApxn59hZdoadZqfYSXaCHWfH2FF2hB1mf7FDcJAdYPvZPraX7WG72S62k+1g"
    "29k2tpVtYZthE9vINrD1bB37k61la9hqWMVWshVsOVsGf7ClbAlbzBaxhex3toDNZ/PYXDaHzWaz2EyYwaaz39g09iubyqawyWwSTGQT2Hg2jo2FMWw0"
    "G8VGshFsOBvGhrIhbDAbxAayAaw/6wd9WR/Wm/ViPVkP1p11Y12hC+vMOrGOrAO0Z+1YW9aGtWatWEvWgjVnzVhT1oQ1Zo1YQ2jA6rN6rC6rw2qzWqwm"
    "qwHVWTWoyqqwyqwSq8gqQHlWjpVlZVhpVoqVZCWgOCvGfmFFWRFWGAqxgqwAy8/ysbwsD8sNP7FcLCfLwbKzbJCVZWGZWSaWkWVg6Vk6SMvSsNQsFUvJ"
    "UkBylowlZUlYYkjEEkICFp/FY3FZHBYbYrGYLAaLzqKxkAXMgWWGaaaYZBgbjDPGKCPMZx6LsB/0B/1Ov9Gv9Av9TD/BR/qBvqfv6H/0Lf2XvoHX9BX9"
    "h76kL+hzeEaf0if0MX0ED+kDuE/v0bv0Dr1Nb8FNeoNep9foVXqFXqZ/wyV6kV6g5+k5ehbO0NP0FD1JT9Dj9Bg9CkfoYfoXPUQP0gOwn+6je+keuht2"
    "0Z2wg26n2+hWuoVuhk10I91A19N18CddC2voarqKrqQr6HJYRv+gS+kSupguogvp77CAzqfz6Fw6h86GWXQmnUGn099gGv0VptIpdDKdRCfSCTCejqNj"
    "6Rg6GkbRkTCCDqfD6FA6hA6GQXQgHUD70360L+0DvWkv2pP2gO60G+1Ku0Bn2ol2pB1oe2hH29I2tDW0oi1pC9ocmtGmtAltTBtBQ9qA1qf1oC6tQ2vT"
    "WlCT1qDVaTVaFarQyrQSrQgVaHlajpaFMrQ0LQUloQQtTovRX6AoLUIL00JQkBag+Wk++jPkpXlobvoT5KI5aQ6aHbLRrDQLzUwzQUaagaan6SAtTUNT"
    "01SQkqagyWkymhSS0MQ0EU0ICWh8Go/GhTg0No0FMSEGjU6j0RAC6qiliEtUU0UlFRQDijJKKaE+eDRCf5Dv8I18JV/gM3wiH8kH8h7ekf/IW/IvvCGv"
    "ySvyD3kJL8hz8ow8hSfkMXlEHsIDcp/cg7twh9wmt8hNuEGuk2vkKlwhl8nfcAkukgvkPDkHZ8kZcpqcgpPkBDlOjpGjcIQcJn+RQ3CQHCD7yT7YS/aQ"
    "3bALdpIdZDvZBlvJFrKZbIKNZANZD+vIn7CWrIHVZBVZCSvIcrIM/iBLyRKyGBaRhfA7WUDmwzwyl8yB2WQWmUlmwHTyG0wjv5KpMIVMJpNgIplAxpNx"
    "MJaMgdFkFBkJI8hwMgyGkiFkMBkEA8kA6E/6kb7Qh/QmvaAn6UG6k27QlXSBzqQT6QgdSHvSDtqSNqQ1aQUtSQtoTpqRptCENCaNoCE0IPWhHqkLdUht"
    "UgtqkhqkOlQjVUkVUhkqkYpQgZQn5aAsKUNKQylSkpQgxaEY+QWKkiKkMBQiBUkByA/5yM+Ql+SB3OQnkgtykhwkO2QjWUkWkhkykYyQgaQn6SAtSUNS"
    "QypISVJAcpIMkpIkJDEkIglJAohP4pG4JA7EJrEgJolBokM0EpIAHFhiQBMFkgiCdUoYoeT/5YNHIvDD/w7f/K/+F/jsf/I/wgf/vf8O/vPfwr/+G3jt"
    "v4J//Jfwwn/uP4On/hN47D+Ch/4DuO/fg7v+Hf823PJvwg3/Olzzr8IV/zL87V/yL8IF/zyc88/CGf80nPJPwgn/uH8MjvpH4LD/FxzyD8IBfz/s8/f6"
    "e2C3vwt2+jtgu78NtvpbYLO/yd8IG/z1sM7/E9b6a2C1vwpW+iv85bDM/wOW+ktgsb8IFvq/wwJ/vj8P5vpzYLY/C2b6M2C6/xtM83/1p8IUfzJM8ifC"
    "BH88jPPHwhh/tD8KRvojYLg/DIb6Q2CwPwgGwgDo7/eDvn4f6O33gp5+D+jud/O7Qhe/M3TyO0IHvz2089tCG2gNrfyW0MJvDs38ptDEbwyN/IZ+A6jv"
    "14O6fh2o7deCmn4NqO5X86tCFb8yVPIrQgW/PJTzy0IZvzSU8ktCCSjuF4Nf/KJQBAr7haCgXwDyQz7/Z8jr54Hc8JOfC3L6OSA7ZPOzQhY/M2SCjH56"
    "SOenhTSQ2k8FKf0UkByS+UkhiZ8YEkFCPwHE9+NBXIjjx4ZYfkyIAdH9aBD6ATiwvgHtI9T7CIm+8HFK+uz/g/r/T9/3fQ8i/g/vh/cdvnlf4Yv3GT7B"
    "R+89vPP+g7fwr/cGXnuv4B946b2A594zeApPvMfwyHsID+C+dw/uenfgNtzybsIN7zpcg6veFbjs/Q2X4KJ3Ac575+AsnIly2jsFJ+GEdxyOeUfhCBz2"
    "/oJD3kE4APu9fbDX2wO7YZe3E3Z422EbbPW2wGZvE2yEDd56WOf9CWthjbcaVnkrYQUs95bBH95SWAKLvUWwEH73FsD8KPO8uTAHZnuzYCbM8KbDb940"
    "+NWbClNgsjcJJsIEbzyM88bCGG80jIKR3ggYDsO8oTAkymBvEAyEAV5/6Ad9vT7Q2+sFPb0e0B26eV2hC3T2OkHHKB289tAO2nptoDW08lpCC685NPOa"
    "QhNo7DWChtDAqw/1otT16kBtqOXVhBpQ3asGVb0qUNmrBBWhglceykFZrwyUjlLKKwkloLhXDH6Bol4RKBylkFcQCkB+Lx/8DHm9PJA7yk9eLsgJObzs"
    "kA2yelkgs5cJMnoZID2k89JCGkjtpYKUUVJ4ySEZJPWSQGJI5CWEBFHie/EgLsTxYkMsiOnFgOheNAghAAfWM6BBgfQQzz2EMw+HtofjxyP/byjv/xWB"
    "H5Hv8A2+whf4HPkEH+EDvI+8g//gLfwLbyKv4RX8Ay8jL+A5PIOn8CTyGB7BQ3gQuQ/34C7cgduRW3ATbsD1KNfgKlyBy5G/4RJchAuR83AOzsIZOB05"
    "BSfhBByPHIOjcAQOw1+RQ3AQDsD+yD7YC3tgN+yK7IQdsB22RbbCFtgMm2BjZAOsh3XwZ5S1sAZWw6rISlgBy2FZ5A9YCktgMSyKLITfYQHMj8yDuTAH"
    "ZsOsyEyYAdPhtyjT4FeYClMik2ESTIQJkfEwDsbCGBgdGQUjYQQMjzIMhsKQyGAYBANhAPSP9IO+0Ad6R3pBT+gB3aFblK7QBTpHOkFH6ADtoV2kLbSB"
    "1tAq0hJaQHNoBk2jNIHG0CjSEBpAfagHdaPUgdpQK1ITakB1qAZVI1WgMlSCipEKUB7KQVkoE6U0lIKSkRJQHIrBL1A0ShEoDIUiBaEA5Id88HOUvJAH"
    "ckd+glyQE3JA9kg2yApZIHMkE2SEDJAe0kVJC2kgdSQVpIQUkBySRUkKSSBxJBEkhAQQH+JFiQtxIHYkFsSEGBAdokUJIQAXsWBAgwIZRcD/v1dYBOHl"
    "/8dgBCvx/+0biUT+ByVoM3g="
)

#: ``(4096,)`` int32: the result mantissa's top 12 bits for each top-12-bit input mantissa.
RCP_MANTISSA: np.ndarray = np.frombuffer(zlib.decompress(base64.b64decode("".join(_PACKED))), dtype="<u2").astype(np.int32)
