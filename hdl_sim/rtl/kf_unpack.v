// kf_unpack: split an IEEE-754 binary(1+EW+MW) value into sign, class flags, exponent and
// significand (combinational).
//   exp is a two's-complement XW-bit biased exponent of significand bit MW, so the value is
//   sig / 2**MW * 2**(exp - BIAS).  Subnormals get exp = 1.
//   NORM = 1 normalises subnormals: sig has its leading one at bit MW (unless the value is
//   zero) and exp may drop below 1 (down to 1 - MW).
`default_nettype none
module kf_unpack #(
    parameter EW   = 8,
    parameter MW   = 23,
    parameter XW   = EW + 2,
    parameter NORM = 0
) (
    input  wire [EW+MW:0] x,
    output wire           sign,
    output wire           is_nan,
    output wire           is_inf,
    output wire           is_zero,
    output wire [XW-1:0]  exp,
    output wire [MW:0]    sig
);
    localparam CW = $clog2(MW + 2);
    wire [EW-1:0] field = x[EW+MW-1:MW];
    wire [MW-1:0] frac = x[MW-1:0];
    wire          sub = field == {EW{1'b0}};
    wire          top = field == {EW{1'b1}};
    wire [MW:0]   raw_sig = {~sub, frac};
    wire [XW-1:0] raw_exp = sub ? {{(XW-1){1'b0}}, 1'b1} : {{(XW-EW){1'b0}}, field};

    assign sign = x[EW+MW];
    assign is_nan = top & (frac != {MW{1'b0}});
    assign is_inf = top & (frac == {MW{1'b0}});
    assign is_zero = sub & (frac == {MW{1'b0}});

    generate
        if (NORM != 0) begin : g_norm
            wire [CW-1:0] lz;
            kf_lzc #(.W(MW + 1), .CW(CW)) u_lzc (.in(raw_sig), .count(lz));
            assign sig = raw_sig << lz;
            assign exp = raw_exp - {{(XW-CW){1'b0}}, lz};
        end else begin : g_raw
            assign sig = raw_sig;
            assign exp = raw_exp;
        end
    endgenerate
endmodule
`default_nettype wire
